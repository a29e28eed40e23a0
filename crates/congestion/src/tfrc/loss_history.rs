//! Loss detection, loss events and the Average Loss Interval (ALI) estimator, shared by the
//! TFRC receiver, the TFMCC receiver and PCC.
//!
//! Two layers:
//! * [`LossIntervals`]: the ALI filter with optional history discounting (dissertation §3.x,
//!   RFC 5348 §5.4–5.5, RFC 4654 §5.4–5.5). Pure arithmetic on interval lengths.
//! * [`LossHistory`]: a packet record that turns arrivals into losses (NDUPACK = 3), losses
//!   into loss events (one event per RTT, interpolated nominal arrival times) and events into
//!   closed intervals fed to [`LossIntervals`].

use crate::time::Time;
use std::collections::BTreeMap;

/// Parameters of the ALI filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AliConfig {
    /// Number of closed intervals averaged (`n`, 8 in the dissertation and both RFCs).
    pub n: usize,
    /// Whether history discounting is on (dissertation: part of the full method; RFCs: optional).
    pub discounting: bool,
    /// Lowest discount factor. 0.5 in the dissertation and RFC 4654; RFC 5348 says 0.25.
    pub discount_floor: f64,
}

impl Default for AliConfig {
    fn default() -> Self {
        AliConfig {
            n: 8,
            discounting: true,
            discount_floor: 0.5,
        }
    }
}

/// ALI weights `w_0..w_{n-1}`: 1 for the newest half, then tapering linearly
/// (`2 (n - i) / (n + 2)`); n = 8 gives 1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2.
pub fn ali_weights(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            if i < n / 2 {
                1.0
            } else {
                2.0 * (n - i) as f64 / (n + 2) as f64
            }
        })
        .collect()
}

/// `ali_weights(8)`, the only `n` the specs use, as a constant: the filter reads its weights
/// on every arrival, and a per-history weight vector was one more heap line per arrival for
/// a simulated population of 10,000 receivers. Equal bit for bit to the computed weights
/// (IEEE division is correctly rounded; a test checks it).
const W8: [f64; 8] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];

/// Weight `w_i` of `ali_weights(n)` without the vector.
#[inline]
fn weight(n: usize, i: usize) -> f64 {
    if n == 8 {
        W8[i]
    } else if i < n / 2 {
        1.0
    } else {
        2.0 * (n - i) as f64 / (n + 2) as f64
    }
}

/// Closed intervals kept inline for `n <= 8` (the specs' `n`), so the hot path of the
/// filter stays inside its owner's struct; a larger `n` spills to the heap.
#[derive(Clone, Debug)]
enum ClosedBuf {
    Inline([(f64, f64); 8]),
    Heap(Box<[(f64, f64)]>),
}

/// A newest-first list of at most `n` closed intervals with their discount factors.
#[derive(Clone, Debug)]
struct Closed {
    buf: ClosedBuf,
    len: usize,
}

impl Closed {
    fn new(n: usize) -> Self {
        let buf = if n <= 8 {
            ClosedBuf::Inline([(0.0, 0.0); 8])
        } else {
            ClosedBuf::Heap(vec![(0.0, 0.0); n].into_boxed_slice())
        };
        Closed { buf, len: 0 }
    }

    #[inline]
    fn full(&mut self) -> &mut [(f64, f64)] {
        match &mut self.buf {
            ClosedBuf::Inline(a) => &mut a[..],
            ClosedBuf::Heap(b) => &mut b[..],
        }
    }

    #[inline]
    fn as_slice(&self) -> &[(f64, f64)] {
        match &self.buf {
            ClosedBuf::Inline(a) => &a[..self.len],
            ClosedBuf::Heap(b) => &b[..self.len],
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [(f64, f64)] {
        let len = self.len;
        &mut self.full()[..len]
    }

    /// Inserts as the newest, dropping the oldest beyond `n` (`push_front` + `truncate(n)`).
    fn push_front(&mut self, e: (f64, f64), n: usize) {
        let cap = n.min(self.full().len());
        if cap == 0 {
            return;
        }
        let keep = self.len.min(cap - 1);
        let buf = self.full();
        buf.copy_within(0..keep, 1);
        buf[0] = e;
        self.len = keep + 1;
    }

    /// Appends as the oldest if there is room below `n`.
    fn push_back(&mut self, e: (f64, f64), n: usize) {
        let len = self.len;
        let buf = self.full();
        if len < n.min(buf.len()) {
            buf[len] = e;
            self.len = len + 1;
        }
    }
}

/// The ALI filter. Interval lengths are in packets.
///
/// `repr(C)`, the fields every arrival touches (`set_open`) first and the closed intervals
/// last: an owner embedding it can keep the closed list out of its per-packet cache lines
/// ([`LossIntervals::HOT_BYTES`]). Field order changes no behaviour.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct LossIntervals {
    /// The open interval `I_0` (packets since the start of the newest loss event).
    open: f64,
    /// The general discount factor `DF` for the current `I_0`.
    df: f64,
    /// `s_hat(1,n)` of `closed`, recomputed whenever `closed` changes: `update_df` needs it on
    /// every arrival (every `set_open`), and the closed intervals change only on loss events
    /// (a simulated TFMCC receiver population spent ~15% of its time recomputing it).
    mean_closed: Option<f64>,
    cfg: AliConfig,
    /// Closed intervals `I_1..I_k`, newest first, each with its stored discount factor `DF_i`.
    closed: Closed,
}

impl LossIntervals {
    /// Bytes at the start of the struct that an arrival touches (everything before the
    /// closed intervals).
    pub const HOT_BYTES: usize = std::mem::offset_of!(LossIntervals, closed);

    /// An empty history (no loss event yet).
    pub fn new(cfg: AliConfig) -> Self {
        let n = cfg.n.max(2);
        LossIntervals {
            cfg: AliConfig { n, ..cfg },
            closed: Closed::new(n),
            open: 0.0,
            df: 1.0,
            mean_closed: None,
        }
    }

    fn compute_mean_closed(&self) -> Option<f64> {
        let closed = self.closed.as_slice();
        if closed.is_empty() {
            return None;
        }
        let n = self.cfg.n;
        let (mut i_tot, mut w_tot) = (0.0, 0.0);
        for (i, &(len, dfi)) in closed.iter().enumerate() {
            i_tot += len * weight(n, i) * dfi;
            w_tot += weight(n, i) * dfi;
        }
        Some(i_tot / w_tot)
    }

    /// Refreshes the cached `s_hat(1,n)` after `closed` changed.
    fn closed_changed(&mut self) {
        self.mean_closed = self.compute_mean_closed();
    }

    /// Number of closed intervals held (at most `n`).
    pub fn len(&self) -> usize {
        self.closed.len
    }

    /// True until the first interval is closed or seeded.
    pub fn is_empty(&self) -> bool {
        self.closed.len == 0
    }

    /// Closed intervals, newest first, with their stored discount factors.
    pub fn closed(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.closed.as_slice().iter().copied()
    }

    /// Current open interval length `I_0`.
    pub fn open(&self) -> f64 {
        self.open
    }

    /// Current general discount factor `DF` (1 = no discounting in effect).
    pub fn discount(&self) -> f64 {
        self.df
    }

    /// Sets `I_0` (it only grows between loss events) and re-evaluates the discount factor.
    pub fn set_open(&mut self, len: f64) {
        self.open = len.max(0.0);
        self.update_df();
    }

    /// A new loss event: `I_0`, which had length `closed_len`, becomes `I_1`; the general
    /// discount factor is folded into the older intervals' stored factors (so a discounted
    /// interval is never un-discounted) and the new `I_0` starts empty.
    pub fn close(&mut self, closed_len: f64) {
        let df = self.df;
        for e in self.closed.as_mut_slice() {
            e.1 *= df;
        }
        self.closed
            .push_front((closed_len.max(1.0), 1.0), self.cfg.n);
        self.closed_changed();
        self.open = 0.0;
        self.df = 1.0;
    }

    /// Appends an interval as the oldest one (seeding when the first loss burst already
    /// closed intervals). Ignored when the history is full.
    pub fn push_oldest(&mut self, len: f64) {
        self.closed.push_back((len.max(1.0), 1.0), self.cfg.n);
        self.closed_changed();
        self.update_df();
    }

    /// Replaces the newest closed interval's length (TFMCC's `l_0 = l_0 (R/R_init)^2`
    /// correction once the first real RTT is known). No-op on an empty history.
    pub fn rescale_newest(&mut self, factor: f64) {
        if let Some(e) = self.closed.as_mut_slice().first_mut() {
            if factor.is_finite() && factor > 0.0 {
                e.0 = (e.0 * factor).max(1.0);
            }
        }
        self.closed_changed();
        self.update_df();
    }

    /// Multiplies the `idx`-th newest closed interval (0 = newest) by `factor`.
    pub fn rescale_nth(&mut self, idx: usize, factor: f64) {
        if let Some(e) = self.closed.as_mut_slice().get_mut(idx) {
            if factor.is_finite() && factor > 0.0 {
                e.0 = (e.0 * factor).max(1.0);
            }
        }
        self.closed_changed();
        self.update_df();
    }

    /// Weighted mean of the closed intervals only, `s_hat(1,n)` (with stored factors).
    pub fn mean_closed(&self) -> Option<f64> {
        self.mean_closed
    }

    /// The average loss interval `s_hat = max(s_hat(1,n), s_hat(0,n-1))` with discounting.
    pub fn mean(&self) -> Option<f64> {
        let m1 = self.mean_closed()?;
        let closed = self.closed.as_slice();
        let k = closed.len();
        let n = self.cfg.n;
        // s_hat(0, k-1): I_0 with w_0, then I_1..I_{k-1} with w_1.. and DF_i * DF.
        let mut i_tot0 = self.open * weight(n, 0);
        let mut w_tot0 = weight(n, 0);
        for (i, &(len, dfi)) in closed.iter().take(k - 1).enumerate() {
            let wi = weight(n, i + 1) * dfi * self.df;
            i_tot0 += len * wi;
            w_tot0 += wi;
        }
        Some(m1.max(i_tot0 / w_tot0))
    }

    /// Loss event rate `p = 1 / s_hat`, 0 before the first loss event.
    pub fn loss_event_rate(&self) -> f64 {
        match self.mean() {
            Some(m) if m > 0.0 => (1.0 / m).min(1.0),
            _ => 0.0,
        }
    }

    fn update_df(&mut self) {
        self.df = 1.0;
        if !self.cfg.discounting {
            return;
        }
        if let Some(m) = self.mean_closed() {
            if self.open > 2.0 * m {
                self.df = (2.0 * m / self.open).max(self.cfg.discount_floor);
            }
        }
    }
}

/// What one arrival did to the loss history.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ArrivalOutcome {
    /// Packets newly declared lost.
    pub lost: u64,
    /// Loss events newly started.
    pub new_events: u32,
    /// True if the first of those was the first loss event ever: the owner must now call
    /// [`LossHistory::seed_first_interval`].
    pub first_event: bool,
    /// The packet was a duplicate or arrived after its slot had been declared lost.
    pub late: bool,
}

/// Largest sequence jump handled packet by packet; a larger one resynchronises (counted as
/// one loss event) so that a corrupt or restarted sequence cannot make us loop for long.
pub const MAX_SEQ_GAP: u64 = 1 << 16;

/// Packet record plus loss-event detection plus ALI.
///
/// `repr(C)`, the fields an in-order arrival touches first and the ALI filter (hot prefix,
/// then its closed intervals) after them, the counters only diagnostics read last:
/// [`LossHistory::HOT_BYTES`] is what a host walking many histories per packet prefetches.
/// Field order changes no behaviour.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct LossHistory {
    events: u64,
    received: u64,
    /// Packets before the first loss (for diagnostics; its length is replaced by the seed).
    pre_loss: u64,
    /// Lowest sequence number not yet resolved (received or declared lost).
    resolved: Option<u64>,
    /// Last resolved *received* packet (`S_before`, `T_before`).
    before: Option<(u64, Time)>,
    /// First packet and nominal time of the newest loss event.
    event: Option<(u64, Time)>,
    /// Received packets above a hole.
    pending: BTreeMap<u64, Time>,
    ndupack: usize,
    ali: LossIntervals,
    lost: u64,
    seeded: bool,
}

impl LossHistory {
    /// Bytes at the start of the struct that an in-order arrival touches (up to the end of
    /// the ALI filter's hot prefix).
    pub const HOT_BYTES: usize = std::mem::offset_of!(LossHistory, ali) + LossIntervals::HOT_BYTES;

    /// A fresh history; `ndupack` is the reordering threshold (3).
    pub fn new(cfg: AliConfig, ndupack: usize) -> Self {
        LossHistory {
            ndupack: ndupack.max(1),
            ali: LossIntervals::new(cfg),
            resolved: None,
            before: None,
            pending: BTreeMap::new(),
            event: None,
            received: 0,
            lost: 0,
            events: 0,
            pre_loss: 0,
            seeded: false,
        }
    }

    /// The ALI filter.
    pub fn intervals(&self) -> &LossIntervals {
        &self.ali
    }

    /// Mutable access to the ALI filter (seeding corrections).
    pub fn intervals_mut(&mut self) -> &mut LossIntervals {
        &mut self.ali
    }

    /// Loss event rate `p` (0 before the first loss event).
    pub fn loss_event_rate(&self) -> f64 {
        self.ali.loss_event_rate()
    }

    /// True once a loss event has been seen.
    #[inline]
    pub fn has_loss(&self) -> bool {
        self.events > 0
    }

    /// Packets received, packets declared lost, loss events.
    pub fn counters(&self) -> (u64, u64, u64) {
        (self.received, self.lost, self.events)
    }

    /// Highest sequence number seen (received), if any.
    pub fn highest(&self) -> Option<u64> {
        self.pending
            .keys()
            .next_back()
            .copied()
            .or(self.before.map(|b| b.0))
    }

    /// Forgets the loss record (TFMCC: `have_loss` cleared after 10 RTTs without data, so
    /// the sender may slow-start again). Counters are kept.
    pub fn reset(&mut self) {
        let cfg = self.ali.cfg;
        self.ali = LossIntervals::new(cfg);
        self.resolved = None;
        self.before = None;
        self.pending.clear();
        self.event = None;
        self.events = 0;
        self.pre_loss = 0;
        self.seeded = false;
    }

    /// Seeds the first loss interval with a synthetic length (packets), as both RFCs and the
    /// dissertation require after the first loss event.
    ///
    /// Returns the seed's index among the closed intervals (0 = newest): usually 0, more if
    /// the first loss burst already spanned several loss events. Only the first call seeds.
    pub fn seed_first_interval(&mut self, len: f64) -> Option<usize> {
        if self.seeded {
            return None;
        }
        self.seeded = true;
        if self.ali.is_empty() {
            self.ali.close(len);
            // close() reset I_0; restore the packets already counted in the new I_0.
            self.refresh_open();
            Some(0)
        } else {
            self.ali.push_oldest(len);
            self.refresh_open();
            Some(self.ali.len() - 1)
        }
    }

    /// A packet with (host-extended) sequence number `seq` arrived at `now`; `rtt` is the RTT
    /// used to aggregate losses into events (seconds).
    pub fn on_packet(&mut self, seq: u64, now: Time, rtt: f64) -> ArrivalOutcome {
        let mut out = ArrivalOutcome::default();
        let Some(resolved) = self.resolved else {
            self.resolved = Some(seq.wrapping_add(1));
            self.before = Some((seq, now));
            self.received += 1;
            self.pre_loss += 1;
            return out;
        };
        // `is_empty` first: an emptied B-tree keeps its root node, and looking into it costs
        // a cache miss per packet when thousands of histories are walked per packet.
        if seq < resolved || (!self.pending.is_empty() && self.pending.contains_key(&seq)) {
            // Duplicate, or a packet arriving after its slot was declared lost. RFC 5348 lets
            // it fill the hole; we keep the loss (conservative, and it cannot be abused to
            // erase losses by replaying old sequence numbers).
            out.late = true;
            return out;
        }
        self.received += 1;
        if seq - resolved > MAX_SEQ_GAP {
            // Resynchronise: everything before `seq` is gone, one loss event.
            self.pending.clear();
            self.lost += seq - resolved;
            out.lost += seq - resolved;
            self.start_event(seq.saturating_sub(1), now, &mut out);
            self.resolved = Some(seq + 1);
            self.before = Some((seq, now));
            self.refresh_open();
            return out;
        }
        if seq == resolved && self.pending.is_empty() {
            // In-order arrival with no hole pending (the common case): exactly what
            // `insert` + `advance` would do, without a B-tree node per packet.
            self.before = Some((seq, now));
            self.resolved = Some(seq + 1);
            if self.events == 0 {
                self.pre_loss += 1;
            }
            self.refresh_open();
            return out;
        }
        self.pending.insert(seq, now);
        self.advance(rtt, &mut out);
        self.refresh_open();
        out
    }

    fn advance(&mut self, rtt: f64, out: &mut ArrivalOutcome) {
        loop {
            let Some(resolved) = self.resolved else {
                return;
            };
            if let Some(t) = self.pending.remove(&resolved) {
                self.before = Some((resolved, t));
                self.resolved = Some(resolved + 1);
                if self.events == 0 {
                    self.pre_loss += 1;
                }
                continue;
            }
            if self.pending.len() < self.ndupack {
                return;
            }
            // `resolved` .. first pending key - 1 is a hole with NDUPACK packets above it.
            let (&s_after, &t_after) = self.pending.iter().next().expect("non-empty");
            let (s_before, t_before) = self.before.unwrap_or((resolved - 1, t_after));
            for s_loss in resolved..s_after {
                let frac = (s_loss - s_before) as f64 / (s_after - s_before) as f64;
                let tb = t_before.as_nanos() as f64;
                let ta = t_after.as_nanos() as f64;
                let t_loss = Time((tb + (ta - tb) * frac).max(0.0) as u64);
                self.lost += 1;
                out.lost += 1;
                let new_event = match self.event {
                    None => true,
                    Some((_, t_start)) => t_loss > t_start + secs(rtt),
                };
                if new_event {
                    self.start_event(s_loss, t_loss, out);
                }
            }
            self.resolved = Some(s_after);
        }
    }

    fn start_event(&mut self, s_loss: u64, t_loss: Time, out: &mut ArrivalOutcome) {
        if let Some((s_start, _)) = self.event {
            self.ali.close(s_loss.saturating_sub(s_start) as f64);
        } else {
            out.first_event = true;
        }
        self.event = Some((s_loss, t_loss));
        self.events += 1;
        out.new_events += 1;
    }

    /// `I_0` = packets from the newest event's first packet up to the last resolved one.
    fn refresh_open(&mut self) {
        if let (Some((s_start, _)), Some(resolved)) = (self.event, self.resolved) {
            self.ali.set_open(resolved.saturating_sub(s_start) as f64);
        }
    }
}

fn secs(s: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(if s.is_finite() {
        s.clamp(0.0, 1e6)
    } else {
        0.0
    })
}

/// Extends a 32-bit wire sequence number to 64 bits relative to the highest seen so far
/// (nearest value modulo 2^32). Also used for 32-bit timestamps.
pub fn extend_u32(highest: Option<u64>, v: u32) -> u64 {
    let Some(h) = highest else { return v as u64 };
    let base = h & !0xffff_ffff;
    let cand = base | v as u64;
    let half = 1u64 << 31;
    if cand + half < h {
        cand + (1 << 32)
    } else if cand > h + half && cand >= 1 << 32 {
        cand - (1 << 32)
    } else {
        cand
    }
}

#[cfg(test)]
mod tests;
