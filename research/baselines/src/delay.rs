//! DLM, the delay-based layered multicast receiver of Barzeghar & Khursandi (seed 002), as
//! consolidated in `delay-based.md` §8, with a TCP-friendly cap.
//!
//! Per packet: one-way delay `D = recv − send` (only differences matter, so a constant clock
//! offset cancels), the sliding minimum `D_min` (120 s), per-layer sequence gaps (loss).
//! Per epoch (≥ 200 ms and ≥ 16 packets, or 1 s): average queueing delay
//! `daowd = mean(D − D_min)`, thresholds `d_i = η_i·dm` from the observed range `dm`, the
//! delay and packet-size trends, the congestion zone, the AIMD update of the calculated rate
//! `X_calc`, the TCP rate `R_TCP` and `R_TARGET = min(X_calc, R_TCP)`. A slow start joins one
//! layer every `I` seconds (with deaf periods `I·B_0/B_i`) until the first sign of
//! congestion; afterwards passive-zone join/leave timers and hold-offs move one layer at a
//! time.
//!
//! Two modes:
//! * [`Mode::Rebuilt`] (default): profile B trend test (Pathload PCT/PDT on epoch medians),
//!   timers `(1 − δ)·T_max` for joins and `(1 − δ)·T_max/2` for leaves (the paper's stated
//!   intent: far past a boundary reacts fast; leaving more reactive than joining);
//! * [`Mode::AsPrinted`]: the paper's literal trend metrics and gate (profile A) and its timer
//!   equations as printed, `δ·T_max` for both (eqs. 4–5), for reproduction attempts. Its
//!   trend gate fails on almost all noisy data (§3.4), so `R_TARGET` then falls back to `R_TCP`.
//!
//! Every choice where the paper is silent is listed in `docs/protocols/delay-based.md`.

use crate::baseline::{secs, tcp_rate_bps, Core, LossIntervals, Observed, Rng};
use congestion::controller::{
    Action, Decision, LayeredController, PacketArrival, Stats, TimerReason,
};
use proto::session::SessionInfo;
use proto::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Which reading of the paper to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Consolidated profile of `delay-based.md` (profile B trend test, fixed timer equations).
    Rebuilt,
    /// Literal trend metrics (profile A) and the timer equations as printed.
    AsPrinted,
}

/// DLM parameters; `\[P\]` paper, `\[R\]` reconstruction, `\[U\]` our choice (see the doc page).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub mode: Mode,
    /// Additive increase bounds per epoch, bit/s \[P\]: 800 and 40 000.
    pub alpha_min_bps: f64,
    pub alpha_max_bps: f64,
    /// Use the harmonic-interpolation reading of α (never negative) instead of the formula
    /// as written \[R\]. Default false (as written).
    pub alpha_harmonic: bool,
    /// Multiplicative decrease factors \[P\]: 0.25, 0.33, 0.5.
    pub beta_min: f64,
    pub beta_mid: f64,
    pub beta_max: f64,
    /// Delay thresholds `d_i = η_i·dm` \[P\]: (0.1, 0.25, 0.8); `d0 = d1/2` \[U\].
    pub eta: [f64; 3],
    /// Fixed absolute thresholds (d1, d2, d3) instead of η·dm [U alternative].
    pub absolute_thresholds: Option<[Duration; 3]>,
    /// `dm` used until it has been observed for `dm_bootstrap_for` and exceeds 5 ms \[U\]: 100 ms.
    pub dm_bootstrap: Duration,
    pub dm_bootstrap_for: Duration,
    /// Floor of `dm` after the bootstrap \[U\]: 100 ms. Without it a path whose queue never
    /// built gets thresholds below one packet's serialisation time and flees its own packet
    /// jitter (DS1 measured: mean level 10.9 instead of 14, E ≈ 0.73). `Duration::ZERO`
    /// restores the profile as written.
    pub dm_floor: Duration,
    /// Minimum epoch length \[U\]: 200 ms; packets needed for a trend test \[U\]: 16; an epoch
    /// closes anyway after `epoch_max` \[U\]: 1 s (trend then unknown if too few samples).
    pub epoch_min: Duration,
    pub epoch_packets: usize,
    pub epoch_max: Duration,
    /// Window of the sliding OWD minimum \[U\]: 120 s.
    pub dmin_window: Duration,
    /// Path RTT without queueing for the TCP equation \[U\]: 100 ms (the paper gives no RTT
    /// measurement; queueing delay `daowd` is added).
    pub rtt_base: Duration,
    /// T_max of the passive-zone timers \[U\]: 0.5 s fixed (absolute OWD is meaningless with
    /// unsynchronised clocks).
    pub t_max: Duration,
    /// Leave timer scale relative to T_max \[U\]: 0.5 (rebuilt), 1.0 in as-printed mode.
    pub leave_timer_scale: f64,
    /// Passive-zone widening ε \[U\]: 0.1.
    pub passive_eps: f64,
    /// Hold-off unit `l` \[U\]: 1 s.
    pub holdoff: Duration,
    /// Slow-start join interval `I` \[D\]: 0.14 s.
    pub slow_start_interval: Duration,
    /// Exit only after the base layer alone exceeds R_TARGET this long \[U\]: 10 s. The
    /// condition is `R_TARGET < B_0` at any level (not only once the leave timers have walked
    /// down to the base layer, which took 5-7 s of the 15-s squeeze in DE8), and the 10 s
    /// count from the start of the unbroken zone-3 run that led there.
    pub exit_after: Duration,
    /// An "increasing" OWD trend counts only if the OWD rose by at least this fraction of d1
    /// over the epoch (last group median minus first) \[U\]: 0.5 (= d0). Profile B's PCT/PDT
    /// are scale-free: a monotone drift of a millisecond (the phase walk of independently
    /// paced CBR layers, or timer noise on a real host) read as incipient congestion and cut
    /// X_calc by 25 % at 1.4 ms of queueing. 0 restores the profile as written.
    pub trend_min_rise_d1: f64,
    /// The same floor during slow start \[U\]: 0 (any profile-B "increasing" ends slow start,
    /// the spec's first sign of congestion). The costs are asymmetric: a false exit on noise
    /// leaves the rest of the climb to the additive increase, a missed onset overshoots by
    /// the 2-4 joins of an epoch (DS1 with the floor at d1: 19 layers on 300 kbit/s, a 550-ms
    /// queue, d1..d3 inflated to 50/127/405 ms for the rest of the run).
    pub trend_min_rise_d1_slow_start: f64,
    /// An epoch that closes after `epoch_max` with no packet at all while layers are held is
    /// treated as total loss (zone 3, β_max) \[U\]; true by default. The paper has no
    /// silence rule; without one the empty epoch reused the previous daowd, landed in zone 1
    /// and added α: DLM joined a layer per second during total silence (testbed DE8).
    pub silence_is_loss: bool,
    /// The exit rule's alternative (§6.2 profile: "or 5 consecutive epochs in Zone 3"): exit
    /// after this many consecutive zone-3 epochs with R_TARGET < B_0; 0 = off \[U\]: off.
    /// Epochs are as short as 200 ms, so 5 of them ended a session within 3 s of another
    /// session's slow-start overshoot (DS2 harness: session 1 exited at 10.5 s).
    pub exit_zone3_epochs: u32,
    /// At most one multiplicative decrease per this interval \[U\]: 1 s (= the hold-off `l`).
    /// The receiver lowers its rate only by a leave (timer, then one layer per hold-off), so
    /// the queue it caused drains seconds later; cutting X_calc in every 200-ms epoch of that
    /// drain counted one congestion episode five times (X_calc 340 → 11 kbit/s in 1 s at a
    /// 39-ms standing queue, one layer too many). Epochs with loss above d1, or silent, cut
    /// regardless. Zero restores a cut every epoch.
    pub decrease_holdoff: Duration,
    /// Cut from the rate actually received, `min(X_calc, B_i)`, not from X_calc alone \[U\].
    /// Off by default: measured worse (DS2 Jain 60-80 s 0.86 with it, 0.94 without, 6
    /// seeds, with the other session-6 changes on). The idea: X_calc winds up above B_i while the join hold-off paces the climb,
    /// and the spec's multiplicative decrease is AIMD's only fairness force only if it is
    /// proportional to what each receiver takes from the shared queue (DS2: two sessions at
    /// 8 and 5 layers each cut three layers per episode: additive decrease, no convergence).
    pub anchor_decrease: bool,
    /// One multiplicative decrease per congestion episode \[U\]; off by default (measured
    /// worse: DS2 Jain 20-50 s 0.90 with it, 0.92 without; DS9 n = 10 level spread 4.8 vs
    /// 3.8, 6 seeds). After a
    /// cut, further (lossless) zone-3 cuts wait while the leaves that cut called for are
    /// still pending (R_TARGET below the current level's passive zone) or while the queue
    /// drains (daowd below the previous epoch's): the queue then reflects the load before
    /// our own leaves took effect, and cutting again on it counted one episode twice or
    /// three times (DS2 session 5: 490 → 334 → 189 kbit/s on one overshoot).
    pub one_cut_per_episode: bool,
    /// Leave hold-off \[U\]: 1 s (the spec's single `l`). A cut of 25-50 % is several layers
    /// on a fine ladder, and one leave per second lets the queue grow for seconds after the
    /// decision (DS2: 300-ms queues); 0.5 s helped the shared-bottleneck rows (with the two
    /// options below: DS9 n = 10 level spread 7.8 → 3.8 layers) but settled the single
    /// receiver of `delay_units::settles_near_the_bottleneck_share` at 12 layers instead of
    /// 13, so the default stays at `l`.
    pub leave_holdoff: Duration,
    /// α is per nominal epoch (`epoch_min`): an epoch of length T adds α·T/epoch_min \[U\]
    /// (see `alpha_epoch_weight`). Off by default: it removes the per-epoch bias against
    /// low-rate receivers (DS2), but a single receiver whose epochs last 0.5 s then gains
    /// 2.5x the α it had, and the harness receiver of `settles_near_the_bottleneck_share`
    /// changed level 9 times in 60 s instead of 0.
    pub alpha_per_time: bool,
    /// Queueing delay of a packet against the sliding minimum OWD of its own layer (never
    /// below the all-layer minimum) \[U\]. Off by default: a layer joined while a queue
    /// stands takes that queue as its baseline and under-reads every later queue, which made
    /// the single receiver of `settles_near_the_bottleneck_share` oscillate (36-42 level
    /// changes in 60 s instead of 0) and cost DS1 throughput (6 seeds, 263 → 228 kbit/s
    /// with the session-6 options), though it halved the DS9 spread. Equal-rate CBR layers of
    /// sessions sharing a FIFO keep fixed relative phases, so some layers always queue
    /// behind another session's packet: a receiver holding two such layers read one
    /// serialisation time (13 ms at 600 kbit/s) of "queueing" that never drains, sat
    /// between d0 and d1 where α is near zero, and stayed at 2 layers beside a session at
    /// 9-12 (DS2, seed-dependent: the start times set the phases).
    pub per_layer_dmin: bool,
    /// In a zone-1 epoch after slow start (no rising delay, daowd ≤ d1: the spec's "rate <
    /// available bandwidth") X_calc is floored at the bottom of the current level's passive
    /// zone, which cancels the leaves a previous cut still had pending \[U\]; off by default.
    /// A cut of 25-50 % is 4-7 layers on a 20-kbit/s ladder and the leave timers carry it out
    /// one layer per hold-off; with daowd between d0 and d1 (α as written is then a few
    /// hundred bit/s per epoch) they kept walking down after the queue had gone (testbed DE1
    /// decision logs: `leave-timer` in zone-1 epochs at daowd 2-9 ms). Off because it did
    /// not fix DE1 on the testbed (one run: the receivers then diverged through zone-3 cuts
    /// from the other receiver's probes instead) and, in `delay_units`' harness, whose layers
    /// restart their phase at every join, it turned the stable 13 layers of
    /// `settles_near_the_bottleneck_share` into a phase-locked 12 ↔ 13 cycle.
    pub zone1_floor: bool,
    /// The exit rule counts only epochs whose loss-based evidence also says the base layer
    /// does not get through: loss in the epoch, R_TCP < B_0 (the TCP equation on the
    /// measured loss event rate) or total silence \[U\]; true by default. The 10 s of the
    /// rule must then be 10 s of such epochs without a break. Loss in the epoch, not R_TCP
    /// alone: a burst of sequence gaps (layers that got no packet through a squeeze show
    /// their losses at once, 88-304 packets) is one loss event in a long loss interval, so
    /// R_TCP jumped above B_0 for a few epochs and restarted the 10 s (testbed DE8 with
    /// R_TCP alone: no exit). The spec's §6.2 exits when R_TARGET =
    /// min(X_calc, R_TCP) < B_0; its §9.4 predicts that DLM yields to loss-based TCP on a
    /// drop-tail queue, whose standing queue keeps the delay signal in zone 3 whatever DLM
    /// does: X_calc then falls below B_0 with the base layer's packets arriving, and the rule
    /// ended the session (testbed DE6, simulator DS8: the player quits beside one TCP flow).
    /// The spec's exit is for a base layer that does not fit (DE8's squeeze below B_0: loss
    /// or silence, so R_TCP < B_0 too); a base layer that is delivered is kept. False
    /// restores the delay-only exit.
    pub exit_needs_loss: bool,
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Rebuilt,
            alpha_min_bps: 800.0,
            alpha_max_bps: 40_000.0,
            alpha_harmonic: false,
            beta_min: 0.25,
            beta_mid: 0.33,
            beta_max: 0.5,
            eta: [0.1, 0.25, 0.8],
            absolute_thresholds: None,
            dm_bootstrap: Duration::from_millis(100),
            dm_bootstrap_for: Duration::from_secs(10),
            dm_floor: Duration::from_millis(100),
            epoch_min: Duration::from_millis(200),
            epoch_packets: 16,
            epoch_max: Duration::from_secs(1),
            dmin_window: Duration::from_secs(120),
            rtt_base: Duration::from_millis(100),
            t_max: Duration::from_millis(500),
            leave_timer_scale: 0.5,
            passive_eps: 0.1,
            holdoff: Duration::from_secs(1),
            slow_start_interval: Duration::from_millis(140),
            exit_after: Duration::from_secs(10),
            trend_min_rise_d1: 1.0,
            trend_min_rise_d1_slow_start: 0.0,
            silence_is_loss: true,
            exit_zone3_epochs: 0,
            decrease_holdoff: Duration::from_secs(1),
            anchor_decrease: false,
            one_cut_per_episode: false,
            leave_holdoff: Duration::from_secs(1),
            alpha_per_time: false,
            per_layer_dmin: false,
            zone1_floor: false,
            exit_needs_loss: true,
            seed: 0xD1_0000,
        }
    }
}

impl Config {
    /// The as-printed reproduction mode: literal trend metrics and timer equations.
    pub fn as_printed() -> Config {
        Config {
            mode: Mode::AsPrinted,
            leave_timer_scale: 1.0,
            ..Config::default()
        }
    }
}

/// A trend verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    Increasing,
    NonIncreasing,
    /// Profile A's "no trend" band, or all-equal samples.
    NoTrend,
    /// Profile A's gate failed ("abnormal") or too few samples.
    Unknown,
}

impl Trend {
    fn code(self) -> f64 {
        match self {
            Trend::Increasing => 1.0,
            Trend::NonIncreasing => -1.0,
            Trend::NoTrend => 0.0,
            Trend::Unknown => f64::NAN,
        }
    }
}

/// Profile B: Pathload PCT/PDT over the medians of ⌊√K⌋ groups of raw samples. Ambiguous
/// results return `None` (the caller keeps the previous verdict).
pub fn trend_pathload(samples: &[f64], min_samples: usize) -> Option<Trend> {
    if samples.len() < min_samples.max(4) {
        return Some(Trend::Unknown);
    }
    if samples.iter().all(|&s| s == samples[0]) {
        return Some(Trend::NoTrend);
    }
    let k = samples.len();
    let g = ((k as f64).sqrt().floor() as usize).max(2);
    let per = k / g;
    let medians: Vec<f64> = (0..g)
        .map(|i| {
            let mut v: Vec<f64> = samples[i * per..(i + 1) * per].to_vec();
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        })
        .collect();
    let inc = medians.windows(2).filter(|w| w[1] > w[0]).count() as f64;
    let pct = inc / (g - 1) as f64;
    let var: f64 = medians.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
    let pdt = if var > 0.0 {
        (medians[g - 1] - medians[0]) / var
    } else {
        0.0
    };
    if pct > 0.66 || pdt > 0.55 {
        Some(Trend::Increasing)
    } else if pct < 0.54 && pdt < 0.45 {
        Some(Trend::NonIncreasing)
    } else {
        None
    }
}

/// The rise of a sample series as profile B sees it: the median of the last of ⌊√K⌋ groups
/// minus the median of the first (0 for fewer than 4 samples).
pub fn group_median_rise(samples: &[f64]) -> f64 {
    let k = samples.len();
    if k < 4 {
        return 0.0;
    }
    let g = ((k as f64).sqrt().floor() as usize).max(2);
    let per = k / g;
    let median = |i: usize| {
        let mut v: Vec<f64> = samples[i * per..(i + 1) * per].to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    median(g - 1) - median(0)
}

/// The paper's literal metrics (eq. 11) with p = 2, after its smoothing (eq. 10, as
/// reconstructed). Returns (TD1, TD2).
pub fn literal_metrics(raw: &[f64]) -> Option<(f64, f64)> {
    let n = raw.len();
    if n < 10 {
        return None;
    }
    // Smoothing: MD_k running mean, TD_k = 0.9·MD_k + 0.1·D_k, OWD_k = TD_k − min TD_j.
    let mut sum = 0.0;
    let mut td_min = f64::INFINITY;
    let mut owd = Vec::with_capacity(n);
    for (k, &d) in raw.iter().enumerate() {
        sum += d;
        let md = sum / (k + 1) as f64;
        let td = 0.9 * md + 0.1 * d;
        td_min = td_min.min(td);
        owd.push(td - td_min);
    }
    // 1-based notation of the paper: o(i) = owd[i-1].
    let o = |i: usize| owd[i - 1];
    let p = 2usize;
    let nf = n as f64;
    let mut te1 = 0.0;
    for m in p..=n {
        for i in 1..m {
            if o(m) > o(i) {
                te1 += 1.0;
            }
        }
    }
    te1 /= nf * (nf - p as f64);
    let (mut tep, mut tepw) = (0.0, 0.0);
    for i in 2..n {
        if o(i + 1) > o(i) && o(i) > o(i - 1) {
            tep += 1.0;
        }
        if o(i + 1) < o(i) && o(i) < o(i - 1) {
            tepw += 1.0;
        }
    }
    tep /= nf - p as f64;
    tepw /= nf - p as f64;
    let te11 = (p..=n).filter(|&i| o(i) > o(i - 1)).count() as f64 / (nf - 1.0);
    let td1 = (te1 + te11) / p as f64;
    let td2 = (tep + tepw) / p as f64;
    Some((td1, td2))
}

/// Profile A verdict: gate `0.4 ≤ TD2 ≤ 0.5`, then TD1 ≥ 0.5 increasing, ≤ 0.4
/// non-increasing, otherwise no trend.
pub fn trend_literal(raw: &[f64]) -> Trend {
    if raw.len() >= 2 && raw.iter().all(|&s| s == raw[0]) {
        return Trend::NoTrend;
    }
    match literal_metrics(raw) {
        None => Trend::Unknown,
        Some((td1, td2)) => {
            if !(0.4..=0.5).contains(&td2) {
                Trend::Unknown
            } else if td1 >= 0.5 {
                Trend::Increasing
            } else if td1 <= 0.4 {
                Trend::NonIncreasing
            } else {
                Trend::NoTrend
            }
        }
    }
}

/// Profile A's packet-size trend (eq. 12): TS ≥ 0.5 increasing, ≤ 0.4 non-increasing.
fn size_trend_literal(sizes: &[f64]) -> Trend {
    let n = sizes.len();
    if n < 2 || sizes.iter().all(|&s| s == sizes[0]) {
        return Trend::NoTrend;
    }
    let ts = sizes.windows(2).filter(|w| w[1] > w[0]).count() as f64 / (n - 1) as f64;
    if ts >= 0.5 {
        Trend::Increasing
    } else if ts <= 0.4 {
        Trend::NonIncreasing
    } else {
        Trend::NoTrend
    }
}

/// The additive increase α(daowd) of §4.2, bit/s per epoch.
pub fn alpha(cfg: &Config, daowd: f64, d0: f64, d1: f64) -> f64 {
    let (amin, amax) = (cfg.alpha_min_bps, cfg.alpha_max_bps);
    if daowd < d0 {
        return amax;
    }
    if cfg.alpha_harmonic {
        if daowd >= d1 {
            return amin;
        }
        let den = amax * (daowd - d0) + amin * (d1 - d0);
        return if den > 0.0 {
            amin * amax * (d1 - d0) / den
        } else {
            amax
        };
    }
    let den = amax * (daowd - d0) + amin * (d1 - daowd);
    if den <= 0.0 {
        return amax;
    }
    amin * amax * (d1 - daowd) / den
}

/// The weight of α for an epoch of length `len` \[U\]: `len / epoch_min`, at most
/// `epoch_max / epoch_min` (and 1 when `epoch_min` is zero), so that the additive increase
/// per second does not depend on how fast a receiver's packets close its epochs.
pub fn alpha_epoch_weight(len: Duration, epoch_min: Duration, epoch_max: Duration) -> f64 {
    let nominal = epoch_min.as_secs_f64();
    if nominal <= 0.0 {
        return 1.0;
    }
    let cap = (epoch_max.as_secs_f64() / nominal).max(1.0);
    (len.as_secs_f64() / nominal).clamp(0.0, cap)
}

/// The multiplicative decrease β of §4.2 (continuous reconstruction).
pub fn beta(cfg: &Config, daowd: f64, thr: [f64; 3], increasing: bool, loss: bool) -> f64 {
    let [d1, d2, d3] = thr;
    if (loss && daowd > d1) || daowd > d3 {
        cfg.beta_max
    } else if increasing {
        cfg.beta_min + (cfg.beta_max - cfg.beta_min) * (daowd.max(0.0) / d3.max(1e-9)).min(1.0)
    } else if daowd > d2 {
        cfg.beta_mid + (cfg.beta_max - cfg.beta_mid) * (daowd - d2) / (d3 - d2).max(1e-9)
    } else if daowd > d1 {
        cfg.beta_min + (cfg.beta_mid - cfg.beta_min) * (daowd - d1) / (d2 - d1).max(1e-9)
    } else {
        cfg.beta_min
    }
}

/// Passive-zone timer length for a normalised distance δ ∈ [0, 1].
pub fn timer_len(cfg: &Config, delta: f64, leave: bool) -> Duration {
    let d = delta.clamp(0.0, 1.0);
    let base = cfg.t_max.as_secs_f64() * if leave { cfg.leave_timer_scale } else { 1.0 };
    match cfg.mode {
        Mode::Rebuilt => secs((1.0 - d) * base),
        Mode::AsPrinted => secs(d * base),
    }
}

/// What one epoch concluded (exposed for tests and logs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpochReport {
    pub daowd: f64,
    pub thresholds: [f64; 3],
    pub trend_d: Trend,
    pub trend_s: Trend,
    pub zone: u8,
    pub loss: u64,
    pub x_calc: f64,
    pub r_tcp: f64,
    pub r_target: f64,
}

/// The DLM receiver.
#[derive(Debug)]
pub struct Dlm {
    cfg: Config,
    core: Core,
    rng: Rng,
    x_calc: f64,
    r_target: Option<f64>,
    slow_start: bool,
    deaf_until: Time,
    next_ss_join: Option<Time>,
    epoch_start: Time,
    next_epoch_check: Option<Time>,
    /// This epoch's samples: (sender timestamp µs, raw OWD s, size B). Sorted by sender
    /// timestamp before the trend tests: the host may feed packets out of arrival order
    /// (per-layer sockets, a newly joined layer's quarantine), and the trend is a function of
    /// send order, as in Pathload.
    samples: Vec<(u64, f64, f64, u8)>,
    loss_in_epoch: u64,
    /// 10-s buckets of the minimum raw OWD (bucket index, minimum).
    dmin: VecDeque<(u64, f64)>,
    /// The same per layer (`per_layer_dmin`), indexed by layer.
    dmin_layer: Vec<VecDeque<(u64, f64)>>,
    daowd_range: Option<(f64, f64)>,
    first_epoch_at: Option<Time>,
    last_daowd: f64,
    prev_trend: Trend,
    losses: LossIntervals,
    join_armed: Option<Time>,
    join_len: Duration,
    leave_armed: Option<Time>,
    leave_len: Duration,
    join_holdoff: Time,
    leave_holdoff: Time,
    base_over_since: Option<Time>,
    /// Consecutive zone-3 epochs with R_TARGET < B_0 (the exit rule's alternative).
    base_over_z3: u32,
    /// Start of the current run of consecutive zone-3 epochs.
    zone3_since: Option<Time>,
    /// No further multiplicative decrease before this time (`decrease_holdoff`).
    decrease_until: Time,
    /// The last epoch's loss-based evidence that the base layer does not get through
    /// (loss, R_TCP < B_0 or silence), for `Config::exit_needs_loss`.
    base_lost: bool,
    last: Option<EpochReport>,
    /// Receive time of the last packet of a held layer (the silence rule needs one).
    last_packet_at: Option<Time>,
}

impl Dlm {
    pub fn new(cfg: Config) -> Dlm {
        Dlm {
            rng: Rng::new(cfg.seed),
            cfg,
            core: Core::new("delay"),
            x_calc: 0.0,
            r_target: None,
            slow_start: true,
            deaf_until: Time::ZERO,
            next_ss_join: None,
            epoch_start: Time::ZERO,
            next_epoch_check: None,
            samples: Vec::new(),
            loss_in_epoch: 0,
            dmin: VecDeque::new(),
            dmin_layer: Vec::new(),
            daowd_range: None,
            first_epoch_at: None,
            last_daowd: 0.0,
            prev_trend: Trend::NonIncreasing,
            losses: LossIntervals::default(),
            join_armed: None,
            join_len: Duration::ZERO,
            leave_armed: None,
            leave_len: Duration::ZERO,
            join_holdoff: Time::ZERO,
            leave_holdoff: Time::ZERO,
            base_over_since: None,
            base_over_z3: 0,
            zone3_since: None,
            decrease_until: Time::ZERO,
            base_lost: false,
            last: None,
            last_packet_at: None,
        }
    }

    /// Whether the receiver is still in slow start.
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }
    /// The calculated rate X_calc, bit/s.
    pub fn x_calc(&self) -> f64 {
        self.x_calc
    }
    /// The last epoch's conclusions.
    pub fn last_epoch(&self) -> Option<EpochReport> {
        self.last
    }

    fn d_min(&self) -> Option<f64> {
        self.dmin.iter().map(|b| b.1).reduce(f64::min)
    }

    /// The OWD baseline of a sample of `layer`: that layer's sliding minimum with
    /// `per_layer_dmin`, else the minimum over all layers.
    fn baseline(&self, layer: u8) -> f64 {
        let global = self.d_min().unwrap_or(0.0);
        if !self.cfg.per_layer_dmin {
            return global;
        }
        self.dmin_layer
            .get(layer as usize)
            .and_then(|q| q.iter().map(|b| b.1).reduce(f64::min))
            .map_or(global, |m| m.max(global))
    }

    /// Folds one OWD sample into a bucketed sliding minimum.
    fn push_min(q: &mut VecDeque<(u64, f64)>, bucket: u64, owd: f64, keep: u64) {
        match q.back_mut() {
            // A late-fed packet of an earlier bucket folds into the newest one.
            Some((b, m)) if *b >= bucket => *m = m.min(owd),
            _ => q.push_back((bucket, owd)),
        }
        while q
            .front()
            .is_some_and(|(b, _)| bucket.saturating_sub(*b) >= keep)
        {
            q.pop_front();
        }
    }

    fn thresholds(&self, now: Time) -> [f64; 3] {
        if let Some(a) = self.cfg.absolute_thresholds {
            return [a[0].as_secs_f64(), a[1].as_secs_f64(), a[2].as_secs_f64()];
        }
        let observed = self
            .first_epoch_at
            .is_some_and(|t| now.saturating_since(t) >= self.cfg.dm_bootstrap_for);
        let dm = self.daowd_range.map_or(0.0, |(lo, hi)| hi - lo);
        let dm = if observed && dm > 0.005 {
            dm.max(self.cfg.dm_floor.as_secs_f64())
        } else {
            self.cfg.dm_bootstrap.as_secs_f64()
        };
        [
            self.cfg.eta[0] * dm,
            self.cfg.eta[1] * dm,
            self.cfg.eta[2] * dm,
        ]
    }

    /// X_calc bounds: `[B_0/2, min(1.5·B_top, B_{i+1} + (B_{i+1} − B_i))]` \[U\]. The spec's
    /// `1.5·B_top` alone let X_calc wind up to 600 kbit/s while the receiver held 400 (a
    /// path with no queue adds α every epoch); the first congestion then needed five
    /// halvings before R_TARGET came below anything. The level-relative cap is where
    /// δ_join reaches 1 (the shortest join timer), so it never delays a join.
    fn clamp_x(&self, x: f64) -> f64 {
        let b0 = self.core.cum_rate(1);
        let n = self.core.max_layers();
        let top = self.core.cum_rate(n);
        let level = self.core.level.max(1);
        let b_i = self.core.cum_rate(level);
        let b_next = if level < n {
            self.core.cum_rate(level + 1)
        } else {
            b_i + (b_i - self.core.cum_rate(level - 1))
        };
        let hi = (1.5 * top).min(2.0 * b_next - b_i).max(0.5 * b0);
        x.clamp(0.5 * b0, hi)
    }

    fn inputs(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("x_calc", self.x_calc),
            ("r_target", self.r_target.unwrap_or(f64::NAN)),
            ("slow_start", if self.slow_start { 1.0 } else { 0.0 }),
        ];
        if let Some(r) = self.last {
            v.extend([
                ("daowd", r.daowd),
                ("d1", r.thresholds[0]),
                ("d2", r.thresholds[1]),
                ("zone", r.zone as f64),
                ("trend_d", r.trend_d.code()),
                ("r_tcp", r.r_tcp),
                ("loss", r.loss as f64),
            ]);
        }
        v
    }

    fn end_epoch(&mut self, now: Time) {
        let cfg = &self.cfg;
        // Send order (see `samples`); a stable sort keeps arrival order for equal stamps.
        self.samples.sort_by_key(|s| s.0);
        // Queueing delay per sample, each against its layer's baseline (`per_layer_dmin`).
        let owd: Vec<f64> = self
            .samples
            .iter()
            .map(|s| s.1 - self.baseline(s.3))
            .collect();
        let sizes: Vec<f64> = self.samples.iter().map(|s| s.2).collect();
        // [U] Total silence while layers are held and packets have flowed before: every
        // packet of the epoch was lost (no sequence gap can show it until one arrives).
        let silent = owd.is_empty()
            && cfg.silence_is_loss
            && self.core.level > 0
            && self.last_packet_at.is_some();
        let prev_daowd = self.last_daowd;
        let daowd = if owd.is_empty() {
            self.last_daowd
        } else {
            owd.iter().map(|d| d.max(0.0)).sum::<f64>() / owd.len() as f64
        };
        self.last_daowd = daowd;
        self.first_epoch_at.get_or_insert(now);
        if !owd.is_empty() {
            self.daowd_range = Some(match self.daowd_range {
                None => (daowd, daowd),
                Some((lo, hi)) => (lo.min(daowd), hi.max(daowd)),
            });
        }
        let thr = self.thresholds(now);
        let [d1, d2, _d3] = thr;
        let d0 = 0.5 * d1;
        let enough = owd.len() >= cfg.epoch_packets;
        let (mut trend_d, trend_s) = match cfg.mode {
            Mode::Rebuilt => {
                // [U] Too few samples for a trend test (sparse packets at low levels):
                // classify by daowd and loss alone rather than returning "unknown", which
                // with no TCP cap yet would freeze R_TARGET at a stale value (observed:
                // a receiver stuck at the base layer until the exit rule fired).
                let mut td = if enough {
                    trend_pathload(&owd, cfg.epoch_packets).unwrap_or(self.prev_trend)
                } else {
                    Trend::NoTrend
                };
                // [U] A scale-free "increasing" verdict on a rise below the noise floor
                // (`trend_min_rise_d1`·d1) is not incipient congestion.
                let floor = if self.slow_start {
                    cfg.trend_min_rise_d1_slow_start
                } else {
                    cfg.trend_min_rise_d1
                };
                if td == Trend::Increasing && group_median_rise(&owd) < floor * d1 {
                    td = Trend::NonIncreasing;
                }
                let ts = if sizes.iter().all(|&s| s == sizes[0]) {
                    Trend::NoTrend
                } else {
                    trend_pathload(&sizes, cfg.epoch_packets).unwrap_or(Trend::NoTrend)
                };
                (td, ts)
            }
            Mode::AsPrinted if silent => (Trend::NoTrend, Trend::NoTrend),
            Mode::AsPrinted => (trend_literal(&owd), size_trend_literal(&sizes)),
        };
        if trend_d != Trend::Unknown && enough {
            self.prev_trend = trend_d;
        }
        if trend_d == Trend::Increasing && trend_s == Trend::Increasing {
            trend_d = Trend::NonIncreasing; // the delay rise is explained by bigger packets
        }
        let loss = self.loss_in_epoch;
        let increasing = trend_d == Trend::Increasing;
        let zone = if silent || increasing || daowd > d2 || (loss > 0 && daowd > d1) {
            3
        } else if daowd <= d1 {
            1
        } else {
            2
        };
        if zone == 3 {
            // Loss above d1 and silence are not held off: packets are being lost now.
            let lossy = silent || (loss > 0 && daowd > d1);
            let episode_open = self.cfg.one_cut_per_episode
                && !self.slow_start
                && (self.leave_pending() || daowd < prev_daowd);
            if lossy || (now >= self.decrease_until && !episode_open) {
                let b = if silent {
                    self.cfg.beta_max
                } else {
                    beta(&self.cfg, daowd, thr, increasing, loss > 0)
                };
                let level = self.core.level;
                let from = if self.cfg.anchor_decrease && level > 0 {
                    self.x_calc.min(self.core.cum_rate(level))
                } else {
                    self.x_calc
                };
                self.x_calc = from * (1.0 - b);
                self.decrease_until = now + self.cfg.decrease_holdoff;
            }
        } else {
            self.x_calc += alpha(&self.cfg, daowd, d0, d1) * self.epoch_weight(now);
        }
        // [U] zone-1 floor (`Config::zone1_floor`): the bottom of the level's passive zone,
        // so pending leaves are cancelled but the next join still needs the additive increase.
        let level = self.core.level;
        if zone == 1 && self.cfg.zone1_floor && !self.slow_start && level > 1 {
            let (b_i, b_prev) = (self.core.cum_rate(level), self.core.cum_rate(level - 1));
            self.x_calc = self.x_calc.max(b_i - self.cfg.passive_eps * (b_i - b_prev));
        }
        self.x_calc = self.clamp_x(self.x_calc);
        let rtt = self.cfg.rtt_base.as_secs_f64() + daowd;
        let r_tcp = tcp_rate_bps(self.core.packet_size(), rtt, self.losses.rate());
        let r_target = if trend_d == Trend::Unknown {
            if r_tcp.is_finite() {
                Some(r_tcp)
            } else {
                self.r_target
            }
        } else {
            Some(self.x_calc.min(r_tcp))
        };
        self.r_target = r_target;
        self.base_lost = silent || loss > 0 || r_tcp < self.core.cum_rate(1);
        if zone == 3 {
            self.zone3_since.get_or_insert(now);
        } else {
            self.zone3_since = None;
        }
        if zone == 3 && r_target.is_some_and(|r| r < self.core.cum_rate(1)) {
            self.base_over_z3 += 1;
        } else {
            self.base_over_z3 = 0;
        }
        self.last = Some(EpochReport {
            daowd,
            thresholds: thr,
            trend_d,
            trend_s,
            zone,
            loss,
            x_calc: self.x_calc,
            r_tcp,
            r_target: r_target.unwrap_or(f64::NAN),
        });
        self.samples.clear();
        self.loss_in_epoch = 0;
        self.epoch_start = now;
        self.next_epoch_check = Some(now + self.cfg.epoch_min.max(Duration::from_millis(1)));

        let level = self.core.level;
        let b_i = self.core.cum_rate(level);
        if self.slow_start {
            if now >= self.deaf_until && (self.x_calc < b_i || zone == 3 || loss > 0) {
                self.slow_start = false;
                self.next_ss_join = None;
                self.x_calc = b_i;
                let inp = self.inputs();
                if (zone == 3 || loss > 0) && level > 1 {
                    self.core.leave_top(now, "slow-start-exit-leave", inp);
                    self.leave_holdoff = now + self.cfg.holdoff;
                } else {
                    self.core.note(now, "slow-start-exit", inp);
                }
            }
            return;
        }
        self.update_timers(now);
    }

    /// The additive increase's weight for the epoch closing at `now` \[U\]: its length over
    /// `epoch_min` (1 for a nominal epoch), when `alpha_per_time`. The paper gives α per
    /// epoch, and an epoch lasts until 16 packets arrived: a receiver at 100 kbit/s
    /// closes one epoch a second, one at 400 kbit/s five, so per epoch the low-rate
    /// receiver gained a fifth of the rate per second and never caught up on a shared queue
    /// (DS2: a session held 2 layers for 30 s beside one at 9-12).
    fn epoch_weight(&self, now: Time) -> f64 {
        if !self.cfg.alpha_per_time {
            return 1.0;
        }
        alpha_epoch_weight(
            now.saturating_since(self.epoch_start),
            self.cfg.epoch_min,
            self.cfg.epoch_max,
        )
    }

    /// Whether R_TARGET lies below the current level's passive zone (a leave is due).
    fn leave_pending(&self) -> bool {
        let level = self.core.level;
        if level <= 1 {
            return false;
        }
        let Some(x) = self.r_target else {
            return false;
        };
        let b_i = self.core.cum_rate(level);
        let b_prev = self.core.cum_rate(level - 1);
        x.min(self.x_calc) < b_i - self.cfg.passive_eps * (b_i - b_prev)
    }

    /// Arms, re-times or cancels the passive-zone timers from R_TARGET (§6.1).
    fn update_timers(&mut self, now: Time) {
        let Some(x) = self.r_target else { return };
        let level = self.core.level;
        if level == 0 {
            return;
        }
        let eps = self.cfg.passive_eps;
        let b_i = self.core.cum_rate(level);
        let b_prev = self.core.cum_rate(level - 1);
        let b_next = self.core.cum_rate(level + 1);
        let can_join = level < self.core.max_layers();
        let upper = b_next + eps * (b_next - b_i);
        let lower = b_i - eps * (b_i - b_prev);
        if can_join && x > upper {
            let d = (x - b_next) / (b_next - b_i).max(1.0);
            self.join_len = timer_len(&self.cfg, d, false);
            self.join_armed.get_or_insert(now);
        } else {
            self.join_armed = None;
        }
        if x < lower {
            let d = (b_i - x) / (b_i - b_prev).max(1.0);
            self.leave_len = timer_len(&self.cfg, d, true);
            self.leave_armed.get_or_insert(now);
        } else {
            self.leave_armed = None;
        }
        // Exit rule: even the base layer exceeds R_TARGET for a sustained period, counted from
        // the first epoch with R_TARGET < B_0 at whatever level (§6.2 profile [U]).
        if x < self.core.cum_rate(1) && (self.base_lost || !self.cfg.exit_needs_loss) {
            let since = *self.base_over_since.get_or_insert(now);
            // The 10 s count from the start of the zone-3 streak that brought R_TARGET down
            // (congestion persisting 10 s), not only from the first epoch below B_0: halving
            // X_calc from a dozen layers takes 4-5 one-second epochs at a squeezed link, so
            // DE8's 15-s squeeze ended as the 10 s ran out (testbed, session 5).
            let streak = self.zone3_since.unwrap_or(since).min(since);
            if now.saturating_since(streak) >= self.cfg.exit_after
                || (self.cfg.exit_zone3_epochs > 0
                    && self.base_over_z3 >= self.cfg.exit_zone3_epochs)
            {
                let inp = self.inputs();
                self.core.exit(now, "base-over-target-exit", inp);
            }
        } else {
            self.base_over_since = None;
        }
    }

    fn join_deadline(&self) -> Option<Time> {
        self.join_armed
            .map(|a| (a + self.join_len).max(self.join_holdoff))
    }
    fn leave_deadline(&self) -> Option<Time> {
        self.leave_armed
            .map(|a| (a + self.leave_len).max(self.leave_holdoff))
    }

    fn fire_timers(&mut self, now: Time) {
        if self.leave_deadline().is_some_and(|t| t <= now) {
            // At the base layer only the sustained-overload exit rule applies (per epoch).
            if self.core.level > 1 {
                let inp = self.inputs();
                self.core.leave_top(now, "leave-timer", inp);
                self.leave_holdoff = now + self.cfg.leave_holdoff;
                self.join_armed = None;
            }
            self.leave_armed = None;
        }
        if self.join_deadline().is_some_and(|t| t <= now) {
            let inp = self.inputs();
            if self.core.join_next(now, "join-timer", inp) {
                let n = self.core.level as f64;
                let total = self.core.max_layers().max(1) as f64;
                let u = 0.5 * self.rng.uniform();
                self.join_holdoff = now + secs((n / total + u) * self.cfg.holdoff.as_secs_f64());
            }
            self.join_armed = None;
        }
    }
}

impl Default for Dlm {
    fn default() -> Self {
        Dlm::new(Config::default())
    }
}

impl LayeredController for Dlm {
    fn name(&self) -> &'static str {
        "delay"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        if self.core.announce(now, info) {
            self.x_calc = self.core.cum_rate(1);
            self.core.join_next(now, "start", vec![("b0", self.x_calc)]);
            self.next_ss_join = Some(now + self.cfg.slow_start_interval);
            self.epoch_start = now;
            self.next_epoch_check = Some(now + self.cfg.epoch_min.max(Duration::from_millis(1)));
        }
    }

    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        let Observed::Held { lost } = self.core.observe(pkt.layer, pkt.seq) else {
            return;
        };
        // The packet's own receive time, not `now`: a host feeds held packets late (the
        // player's quarantine of a newly joined layer holds them 150 ms, and it passes the
        // latest arrival time as `now`), and `now − send` then read as up to 150 ms of
        // queueing right after every join: a zone-3 leave 0.4-2 s after most testbed joins.
        // A host that leaves `recv_time` unset (zero) gets `now`.
        let at = if pkt.recv_time == Time::ZERO {
            now
        } else {
            pkt.recv_time
        };
        let owd = (at.as_micros() as i128 - pkt.send_time_us as i128) as f64 / 1e6;
        let bucket = at.as_nanos() / 10_000_000_000;
        let keep = self.cfg.dmin_window.as_secs() / 10 + 1;
        Self::push_min(&mut self.dmin, bucket, owd, keep);
        if self.cfg.per_layer_dmin {
            let k = pkt.layer as usize;
            if self.dmin_layer.len() <= k {
                self.dmin_layer.resize_with(k + 1, VecDeque::new);
            }
            Self::push_min(&mut self.dmin_layer[k], bucket, owd, keep);
        }
        if self.samples.len() < 100_000 {
            self.samples
                .push((pkt.send_time_us, owd, pkt.size as f64, pkt.layer));
        }
        self.last_packet_at = Some(at);
        self.losses.on_packets(1);
        if lost > 0 {
            let rtt = self.cfg.rtt_base.as_secs_f64() + self.last_daowd;
            self.losses.on_loss(now, lost, rtt);
            self.loss_in_epoch += lost;
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.core.exited || self.core.info.is_none() {
            return;
        }
        if self.next_epoch_check.is_some_and(|t| t <= now) {
            let age = now.saturating_since(self.epoch_start);
            if self.samples.len() >= self.cfg.epoch_packets || age >= self.cfg.epoch_max {
                self.end_epoch(now);
            } else {
                self.next_epoch_check = Some(now + Duration::from_millis(50));
            }
        }
        if self.core.exited {
            return;
        }
        if self.slow_start {
            if self.next_ss_join.is_some_and(|t| t <= now) {
                let mut inp = self.inputs();
                inp.push(("deaf_until", self.deaf_until.as_secs_f64()));
                if self.core.join_next(now, "slow-start-join", inp) {
                    let b0 = self.core.cum_rate(1);
                    let bi = self.core.cum_rate(self.core.level);
                    let i = self.cfg.slow_start_interval.as_secs_f64();
                    self.deaf_until = now + secs(i * b0 / bi.max(1.0));
                    // [U] the calculated rate is floored at the joined rate while climbing,
                    // so the exit test "X_calc < B_i" reacts to decreases, not to lag.
                    self.x_calc = self.x_calc.max(bi);
                    self.next_ss_join =
                        Some(now + self.cfg.slow_start_interval.max(Duration::from_millis(1)));
                } else {
                    self.next_ss_join = None; // all layers held
                }
            }
        } else {
            self.fire_timers(now);
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.core.poll_action()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        if self.core.exited || self.core.info.is_none() {
            return None;
        }
        let mut best: Option<(Time, TimerReason)> = None;
        let mut consider = |t: Option<Time>, r: TimerReason| {
            if let Some(t) = t {
                if best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, r));
                }
            }
        };
        consider(self.next_epoch_check, TimerReason::Adapt);
        if self.slow_start {
            consider(self.next_ss_join, TimerReason::Other);
        } else {
            consider(self.join_deadline(), TimerReason::HoldOff);
            consider(self.leave_deadline(), TimerReason::HoldOff);
        }
        best
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.core.poll_decision()
    }

    fn stats(&self) -> Stats {
        let mut s = self.core.stats();
        s.estimate_bps = self.r_target;
        s.rtt_s = Some(self.cfg.rtt_base.as_secs_f64() + self.last_daowd);
        s
    }

    fn layers(&self) -> u8 {
        self.core.level
    }
}
