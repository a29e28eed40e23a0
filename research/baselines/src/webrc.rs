//! WEBRC, Wave and Equation Based Rate Control (RFC 3738), receiver side, plus the sender's
//! wave rate law ([`WaveSchedule`]).
//!
//! ## Logical layers
//! Like FLID-DL, WEBRC uses dynamic layering. The controller works on *logical* layers:
//! layer 0 is the base channel, layer `j ≥ 1` the `j`-th lowest active wave. Within a time
//! slot (TSD, 10 s) logical layer `j` runs at `BCR_P·P^(−j)·P^(τ/TSD)` packets/s (`τ` the
//! time into the slot); at each slot change the lowest wave goes quiescent and every wave
//! moves down one layer. So at a slot change the receiver's level decays by one: the
//! controller emits `Leave(top)` (RFC 3738 §3.2.3.3: the receiver leaves the quiescent
//! channel) and the host maps it, and every `Join(k)`, to physical channels with
//! [`WaveSchedule::channel_for`] (`CN = (CTSI + k) mod T` for the k-th lowest active wave).
//!
//! ## What is taken from the announcement
//! `BCR_P = layers[0].rate_bps / (8·packet_size)` (the base channel rate at the start of a
//! slot), `N = layers.len() − 1` waves, `LENP_B = packet_size`. P, TSD, EL and the filter
//! constants are the RFC's recommended values in [`Config`]. The slot index `CTSI` is derived
//! from the sender timestamp (`send_time_us / TSD`) instead of a header field.
//!
//! ## Receiver machinery (RFC 3738 §3.2)
//! MRTT from join to first packet (corrected for the wave's packet spacing) filtered into
//! ARTT with the variance-adaptive weight; LOSSP from the two-stage W/X/Y/Z filter; REQN
//! from the TFRC equation; TRR_P (true) and ARR_P (anticipated) reception rates; slow start
//! (SSR_P = ∞) ended by loss, an MRTT jump, the maximum rate, or TRR lagging ARR; target
//! TRATE; a join decision each epoch (EL); join and exceptional timeouts.

use crate::baseline::{secs, Core, Observed};
use congestion::controller::{
    Action, Decision, LayeredController, PacketArrival, Stats, TimerReason,
};
use proto::session::SessionInfo;
use proto::time::Time;
use std::time::Duration;

/// The wave rate law and channel numbering (sender and host side).
#[derive(Clone, Debug, PartialEq)]
pub struct WaveSchedule {
    /// Base channel rate at the start of a slot, packets/s (BCR_P).
    pub bcr_p: f64,
    /// Multiplicative rate drop per slot (P).
    pub p: f64,
    /// Time slot duration (TSD).
    pub tsd: Duration,
    /// Active waves (N) and quiescent slots (Q).
    pub n: u32,
    pub q: u32,
}

impl WaveSchedule {
    /// Total wave channels T = N + Q.
    pub fn channels(&self) -> u32 {
        self.n + self.q.max(1)
    }
    /// Slot index of a sender timestamp.
    pub fn slot_at(&self, send_time_us: u64) -> u64 {
        send_time_us / (self.tsd.as_micros().max(1) as u64)
    }
    /// Rate of logical layer `j` (0 = base, j-th lowest active wave) at sender time `t_us`,
    /// packets/s.
    pub fn rate_pps(&self, j: u32, t_us: u64) -> f64 {
        if j > self.n {
            return 0.0;
        }
        let tsd = self.tsd.as_micros().max(1) as u64;
        let tau = (t_us % tsd) as f64 / tsd as f64;
        self.bcr_p * self.p.powi(-(j as i32)) * self.p.powf(tau)
    }
    /// Physical wave channel number carrying logical layer `j ≥ 1` in `slot`.
    pub fn channel_for(&self, j: u32, slot: u64) -> Option<u32> {
        if j == 0 || j > self.n {
            return None;
        }
        let t = self.channels() as u64;
        Some(((slot % t + j as u64 - 1) % t) as u32)
    }
}

/// WEBRC receiver parameters (RFC 3738 recommended values).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// P: multiplicative drop per slot (0.75).
    pub p: f64,
    /// TSD: slot duration (10 s).
    pub tsd: Duration,
    /// QD: minimum quiescent period (300 s), for the channel numbering only.
    pub qd: Duration,
    /// EL: epoch length (0.5 s).
    pub el: Duration,
    /// Nu, Delta: time- and loss-based smoothing of LOSSP (0.3, 0.3).
    pub nu: f64,
    pub delta: f64,
    /// Alpha: MRTT smoothing (0.25).
    pub alpha: f64,
    /// MRR_b: the receiver's maximum rate, bit/s (None = unlimited).
    pub max_rate_bps: Option<f64>,
    /// Apply the optional slow-start rule "wait one full epoch after the first packet of a
    /// wave, and stop if TRR lags ARR" (RECOMMENDED; on).
    pub ss_epoch_rule: bool,
    /// Apply the optional "RR sufficiently below RRmax" join check (RECOMMENDED; on).
    pub rr_check: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            p: 0.75,
            tsd: Duration::from_secs(10),
            qd: Duration::from_secs(300),
            el: Duration::from_millis(500),
            nu: 0.3,
            delta: 0.3,
            alpha: 0.25,
            max_rate_bps: None,
            ss_epoch_rule: true,
            rr_check: true,
        }
    }
}

/// REQN of RFC 3738 §3.2.2.3, packets/s.
pub fn reqn(artt: f64, lossp: f64) -> f64 {
    let p = lossp.clamp(1e-12, 1.0);
    1.0 / (artt.max(1e-4) * p.sqrt() * (0.816 + 7.35 * p * (1.0 + 32.0 * p * p)))
}

/// The LOSSP that makes REQN equal `target` (bisection; REQN decreases in LOSSP).
pub fn lossp_for(artt: f64, target: f64) -> f64 {
    let (mut lo, mut hi) = (1e-12f64.ln(), 0.0f64);
    if reqn(artt, 1e-12) <= target {
        return 1e-12;
    }
    if reqn(artt, 1.0) >= target {
        return 1.0;
    }
    for _ in 0..80 {
        let mid = 0.5 * (lo + hi);
        if reqn(artt, mid.exp()) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (0.5 * (lo + hi)).exp()
}

/// The WEBRC receiver.
#[derive(Debug)]
pub struct Webrc {
    cfg: Config,
    core: Core,
    sched: Option<WaveSchedule>,
    lenp: f64,
    // time slots
    ctsi: Option<u64>,
    last_slot_change: Time,
    last_packet: Option<Time>,
    // joins and RTT
    joining: bool,
    join_time: Time,
    first_base: bool,
    artt: f64,
    v: f64,
    k: u32,
    last_first_delay: Option<f64>,
    last_wave_first_pkt: Option<Time>,
    // loss filter
    w: f64,
    x: f64,
    y: f64,
    z: f64,
    lossp: f64,
    loss_event_until: Option<Time>,
    // rates (packets/s)
    trr: f64,
    arr: f64,
    ssr: Option<f64>,
    rr_max: f64,
    last_rr: f64,
    trate: f64,
    // epoch accounting
    next_epoch: Option<Time>,
    epoch_rx: u64,
    epoch_lost: u64,
}

impl Webrc {
    pub fn new(cfg: Config) -> Webrc {
        Webrc {
            cfg,
            core: Core::new("webrc"),
            sched: None,
            lenp: 512.0,
            ctsi: None,
            last_slot_change: Time::ZERO,
            last_packet: None,
            joining: false,
            join_time: Time::ZERO,
            first_base: false,
            artt: 0.5,
            v: 0.25,
            k: 0,
            last_first_delay: None,
            last_wave_first_pkt: None,
            w: 0.0,
            x: 0.0,
            y: 0.0,
            z: 1.0,
            lossp: 1.0,
            loss_event_until: None,
            trr: 0.0,
            arr: 0.0,
            ssr: None,
            rr_max: 0.0,
            last_rr: 0.0,
            trate: 0.0,
            next_epoch: None,
            epoch_rx: 0,
            epoch_lost: 0,
        }
    }

    /// Waves joined (NWC).
    pub fn nwc(&self) -> u32 {
        self.core.level.saturating_sub(1) as u32
    }
    /// ARTT, seconds.
    pub fn artt(&self) -> f64 {
        self.artt
    }
    /// LOSSP.
    pub fn lossp(&self) -> f64 {
        self.lossp
    }
    /// (TRR_P, ARR_P, TRATE) in packets/s.
    pub fn rates(&self) -> (f64, f64, f64) {
        (self.trr, self.arr, self.trate)
    }
    /// Whether slow start (SSR_P = ∞) is still on.
    pub fn in_slow_start(&self) -> bool {
        self.ssr.is_none()
    }

    fn bcr(&self) -> f64 {
        self.sched.as_ref().map_or(1.0, |s| s.bcr_p)
    }
    fn p(&self) -> f64 {
        self.cfg.p.clamp(0.05, 0.99)
    }
    fn n_max(&self) -> u32 {
        self.sched.as_ref().map_or(0, |s| s.n)
    }
    fn mrr_p(&self) -> f64 {
        self.cfg
            .max_rate_bps
            .map_or(f64::INFINITY, |b| b / (8.0 * self.lenp))
    }
    fn sr_p(&self) -> f64 {
        let (p, n) = (self.p(), self.n_max() as i32);
        self.bcr() * ((1.0 / p).powi(n + 1) - 1.0) / (1.0 / p - 1.0)
    }
    fn ssminr(&self) -> f64 {
        let p = self.p();
        self.bcr() * (1.0 + 1.0 / p + 1.0 / (p * p))
    }
    /// Aggregate-rate factor of going from `nwc` to `nwc + 1` waves.
    fn step(&self, nwc: u32) -> f64 {
        let ip = 1.0 / self.p();
        (ip.powi(nwc as i32 + 2) - 1.0) / (ip.powi(nwc as i32 + 1) - 1.0)
    }

    fn inputs(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("nwc", self.nwc() as f64),
            ("trr_p", self.trr),
            ("arr_p", self.arr),
            ("trate_p", self.trate),
            ("ssr_p", self.ssr.unwrap_or(f64::INFINITY)),
            ("lossp", self.lossp),
            ("artt", self.artt),
        ]
    }

    fn reset_loss(&mut self, lossp: f64) {
        let a = lossp.clamp(1e-12, 1.0);
        self.w = 0.0;
        self.x = 0.0;
        self.y = 0.0;
        self.z = 1.0 / a;
        self.lossp = a;
    }

    /// Ends start-up mode with SSR_P = `ssr`, resetting LOSSP so that REQN = TRR_P.
    fn end_slow_start(&mut self, now: Time, ssr: f64, why: &'static str) {
        if self.ssr.is_some() {
            self.ssr = Some(ssr);
            return;
        }
        self.ssr = Some(ssr);
        let l = lossp_for(self.artt, self.trr.max(1e-6));
        self.reset_loss(l);
        let inp = self.inputs();
        self.core.note(now, why, inp);
    }

    fn on_first_packet_after_join(&mut self, now: Time) {
        self.joining = false;
        let first_delay = now.saturating_since(self.join_time).as_secs_f64();
        if self.core.level == 1 {
            self.artt = first_delay.max(1e-4);
            self.v = self.artt * self.artt;
            self.k = 0;
            return;
        }
        let p = self.p();
        let nwc = self.nwc() as i32;
        // SS end on a sharp increase of (FirstTime − JoinTime) between successive waves.
        if let Some(prev) = self.last_first_delay {
            let thr = (p.powi(nwc + 1) - 1.0) / (p * p.ln()) / self.arr.max(1e-6);
            if self.ssr.is_none() && first_delay - prev > thr {
                let s = self.ssminr().max(p * self.trr);
                self.end_slow_start(now, s, "ss-end-mrtt-jump");
            }
        }
        self.last_first_delay = Some(first_delay);
        self.last_wave_first_pkt = Some(now);
        let mrtt = first_delay - (1.0 / p).ln() / 2.0 / (1.0 - p) / self.bcr() * p.powi(nwc);
        self.k += 1;
        let omega = (self.cfg.alpha * self.artt * self.artt / self.v.max(1e-12)).clamp(1e-6, 1.0);
        let rho = omega / (1.0 - (1.0 - omega).powi(self.k as i32 + 1)).max(1e-12);
        let rho = rho.clamp(0.0, 1.0);
        self.v = (1.0 - rho) * self.v + rho * mrtt * mrtt;
        self.artt = (p * self.artt)
            .max((1.0 - rho) * self.artt + rho * mrtt)
            .max(1e-4);
    }

    fn on_loss(&mut self, now: Time, lost: u64) {
        self.w += lost as f64;
        self.epoch_lost += lost;
        let in_event = self.loss_event_until.is_some_and(|t| now < t);
        if !in_event {
            self.x += self.w;
            self.w = 0.0;
            self.y += 1.0;
            self.loss_event_until = Some(now + secs(self.artt));
            let s = self.ssminr().max(self.p() * self.trr);
            if self.ssr.is_none() {
                self.end_slow_start(now, s, "ss-end-loss");
            } else {
                self.ssr = Some(s);
            }
        }
    }

    fn on_slot_change(&mut self, now: Time, new: u64) {
        let cur = self.ctsi.unwrap_or(new);
        self.ctsi = Some(new);
        self.last_slot_change = now;
        if new <= cur {
            return;
        }
        let steps = (new - cur).min(self.n_max() as u64 + 1);
        for _ in 0..steps {
            // The base channel restarts at BCR_P (+(1−P)·BCR_P) ...
            self.arr += (1.0 - self.p()) * self.bcr();
            if self.nwc() == 0 {
                continue;
            }
            if self.joining && self.nwc() == 1 {
                self.joining = false;
            }
            // ... and the lowest wave, now quiescent, is left (−BCR_P).
            self.arr = (self.arr - self.bcr()).max(0.0);
            let mut inp = self.inputs();
            inp.push(("ctsi", new as f64));
            self.core.leave_top(now, "slot-change-quiescent", inp);
        }
        self.core.reset_trackers();
    }

    fn end_epoch(&mut self, now: Time) {
        let el = self.cfg.el.as_secs_f64();
        let p = self.p();
        let tsd = self.cfg.tsd.as_secs_f64().max(1e-3);
        let rr = self.epoch_rx as f64 / el;
        let irr = (self.epoch_rx + self.epoch_lost) as f64 / el;
        self.epoch_rx = 0;
        self.epoch_lost = 0;
        self.last_rr = rr;
        self.rr_max = self.rr_max.max(rr);
        let (beta, zeta) = if self.ssr.is_none() {
            ((1.0 - p.powf(0.25)) / 2.0, p.sqrt() / (1.0 + p.sqrt()))
        } else {
            (1.0 - (p / (1.0 + p)).powf(el / tsd), 2.0 * el / (4.0 + tsd))
        };
        if self.first_base {
            self.trr = (1.0 - zeta) * self.trr + zeta * rr;
            self.arr = p.powf(el / tsd) * (1.0 - beta) * self.arr + beta * irr;
            let nwc = self.nwc() as i32;
            let arr_max = ((1.0 / p).powi(nwc + 1) - 1.0) / (1.0 / p - 1.0) * self.bcr();
            self.arr = self.arr.min(arr_max);
        }
        // LOSSP filter (§3.2.2.1).
        let g = self.cfg.nu * el / tsd;
        let d = self.cfg.delta;
        let (x, y, w) = (self.x, self.y, self.w);
        self.z = self.z * (1.0 - d).powf(g * y)
            + g * x / (g * y + 1.0) * (1.0 - (1.0 - d).powf(g * y + 1.0));
        self.x = x * (1.0 - g);
        self.y = y * (1.0 - g);
        let (x, y) = (self.x, self.y);
        let z1 = self.z * (1.0 - d).powf(y) + x / (y + 1.0) * (1.0 - (1.0 - d).powf(y + 1.0));
        let z2 = self.z * (1.0 - d).powf(y + 1.0)
            + (x + w + 1.0) / (y + 2.0) * (1.0 - (1.0 - d).powf(y + 2.0));
        let zmax = z1.max(z2).max(1.0);
        self.lossp = if zmax.is_finite() { 1.0 / zmax } else { 1e-12 };
        self.decide_join(now);
    }

    fn decide_join(&mut self, now: Time) {
        let el = self.cfg.el.as_secs_f64();
        let p = self.p();
        let nwc = self.nwc();
        let next = self.arr * self.step(nwc);
        let req = reqn(self.artt, self.lossp);
        self.trate = match self.ssr {
            None => (4.0 * self.trr).min(self.mrr_p()),
            Some(s) => s.max(req).min(self.mrr_p()),
        };
        if !self.first_base
            || self.loss_event_until.is_some_and(|t| now < t)
            || self.joining
            || nwc >= self.n_max()
            || self.core.level == 0
        {
            return;
        }
        if self.ssr.is_none() {
            // Maximum reception rate reached.
            if next > self.mrr_p() || next > self.sr_p() {
                let s = self.ssminr().max(self.trr);
                self.end_slow_start(now, s, "ss-end-max-rate");
            } else if self.cfg.ss_epoch_rule && nwc > 0 {
                let Some(fp) = self.last_wave_first_pkt else {
                    return;
                };
                if now.saturating_since(fp) < self.cfg.el {
                    return;
                }
                let pe = p.powf(-el / self.cfg.tsd.as_secs_f64().max(1e-3));
                let gg = (p.powi(-(nwc as i32) - 1) - 1.0) / (p.powi(-(nwc as i32)) - 1.0);
                let zeta = p.sqrt() / (1.0 + p.sqrt());
                let c = zeta + (1.0 - zeta) * pe * (zeta + (1.0 - zeta) * p.sqrt() * pe) / gg;
                if self.trr < c * self.arr - 2.0 / el {
                    let s = self.ssminr().max(self.trr);
                    self.end_slow_start(now, s, "ss-end-trr-lags");
                    return;
                }
            }
            self.trate = match self.ssr {
                None => (4.0 * self.trr).min(self.mrr_p()),
                Some(s) => s.max(req).min(self.mrr_p()),
            };
        }
        if self.trate < next {
            return;
        }
        if self.ssr.is_some() && self.cfg.rr_check {
            let ok = self.last_rr <= (self.rr_max - 2.0 / el).max(p * self.rr_max);
            if !ok {
                // Not sufficiently below RRmax: no join, and LOSSP reset so REQN = next.
                let l = lossp_for(self.artt, next);
                self.reset_loss(l);
                return;
            }
        }
        let mut inp = self.inputs();
        inp.push(("next_p", next));
        inp.push(("reqn_p", req));
        if self.core.join_next(now, "join-wave", inp) {
            let nwc = self.nwc();
            let ip = 1.0 / p;
            self.arr *= (ip.powi(nwc as i32 + 1) - 1.0) / (ip.powi(nwc as i32) - 1.0);
            self.joining = true;
            self.join_time = now;
            self.rr_max = 0.0;
        }
    }

    fn join_timeout(&self) -> Option<Time> {
        if !self.joining {
            return None;
        }
        let t = (2.0 * self.v / self.artt.max(1e-4)).max(10.0 * self.artt);
        Some(self.join_time + secs(t.min(60.0)))
    }

    fn exceptional_deadline(&self) -> Option<Time> {
        let tsd = self.cfg.tsd.as_secs_f64();
        let silence = self.last_packet.unwrap_or(self.join_time) + secs(tsd.max(10.0));
        if !self.first_base {
            return Some(silence);
        }
        let no_slot = self.last_slot_change + secs((2.0 * tsd).max(20.0));
        Some(silence.min(no_slot))
    }
}

impl Default for Webrc {
    fn default() -> Self {
        Webrc::new(Config::default())
    }
}

impl LayeredController for Webrc {
    fn name(&self) -> &'static str {
        "webrc"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        let first = self.core.announce(now, info);
        self.lenp = info.packet_size.max(1) as f64;
        let bcr = info.layers.first().map_or(0.0, |l| l.rate_bps as f64) / (8.0 * self.lenp);
        let tsd = self.cfg.tsd.as_secs_f64().max(1e-3);
        self.sched = Some(WaveSchedule {
            bcr_p: bcr.max(1e-3),
            p: self.cfg.p,
            tsd: self.cfg.tsd,
            n: info.layers.len().saturating_sub(1).min(254) as u32,
            q: (self.cfg.qd.as_secs_f64() / tsd).ceil().clamp(1.0, 1e6) as u32,
        });
        if first {
            self.core.join_next(now, "join-base", vec![]);
            self.joining = true;
            self.join_time = now;
            self.next_epoch = Some(now + self.cfg.el);
            self.last_slot_change = now;
        }
    }

    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        if self.core.exited || self.core.info.is_none() {
            return;
        }
        let slot = pkt.send_time_us / (self.cfg.tsd.as_micros().max(1) as u64);
        match self.ctsi {
            None => {
                self.ctsi = Some(slot);
                self.last_slot_change = now;
            }
            // Reordered packets of an earlier slot, or an implausibly large jump (more than
            // the wave's lifetime), do not trigger a slot change (§3.2.3.3).
            Some(c) if slot > c && slot - c <= self.n_max() as u64 + 1 => {
                self.on_slot_change(now, slot)
            }
            Some(c) if slot < c => {
                if pkt.layer < self.core.level {
                    self.core.received += 1;
                    self.epoch_rx += 1;
                    self.w += 1.0;
                }
                self.last_packet = Some(now);
                return;
            }
            _ => {}
        }
        let Observed::Held { lost } = self.core.observe(pkt.layer, pkt.seq) else {
            return;
        };
        self.last_packet = Some(now);
        self.epoch_rx += 1;
        self.w += 1.0;
        if pkt.layer == 0 && !self.first_base {
            self.first_base = true;
            let (p, tsd) = (self.p(), self.cfg.tsd.as_micros().max(1) as u64);
            let tau = (pkt.send_time_us % tsd) as f64 / tsd as f64;
            self.trr = self.bcr() * p.powf(tau);
            self.arr = self.trr;
        }
        if self.joining && pkt.layer + 1 == self.core.level {
            self.on_first_packet_after_join(now);
        }
        if lost > 0 {
            self.on_loss(now, lost);
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.core.exited || self.core.info.is_none() {
            return;
        }
        if self.exceptional_deadline().is_some_and(|t| now >= t) {
            let inp = self.inputs();
            self.core.exit(now, "exceptional-timeout", inp);
            return;
        }
        if self.join_timeout().is_some_and(|t| now >= t) {
            self.joining = false;
            if self.core.level > 1 {
                let nwc = self.nwc() as i32;
                let ip = 1.0 / self.p();
                self.arr *= (ip.powi(nwc) - 1.0) / (ip.powi(nwc + 1) - 1.0);
                let inp = self.inputs();
                self.core.leave_top(now, "join-timeout", inp);
            }
        }
        let el = self.cfg.el.max(Duration::from_millis(1));
        while let Some(t) = self.next_epoch.filter(|&t| t <= now) {
            self.next_epoch = Some(t + el);
            if now.saturating_since(t) > 4 * el {
                self.next_epoch = Some(now + el); // long stall: do not replay
            }
            self.end_epoch(now);
            if self.core.exited {
                return;
            }
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.core.poll_action()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        if self.core.exited || self.core.info.is_none() {
            return None;
        }
        let mut best = self.next_epoch.map(|t| (t, TimerReason::Adapt));
        for (t, r) in [
            (self.join_timeout(), TimerReason::Other),
            (self.exceptional_deadline(), TimerReason::Silence),
        ] {
            if let Some(t) = t {
                if best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, r));
                }
            }
        }
        best
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.core.poll_decision()
    }

    fn stats(&self) -> Stats {
        let mut s = self.core.stats();
        s.estimate_bps = Some(self.trate * 8.0 * self.lenp);
        s.rtt_s = Some(self.artt);
        s
    }

    fn layers(&self) -> u8 {
        self.core.level
    }
}
