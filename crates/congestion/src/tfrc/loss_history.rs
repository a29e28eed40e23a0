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
mod tests {
    use super::*;

    fn ali_with(closed: &[f64], open: f64, discounting: bool) -> LossIntervals {
        let mut a = LossIntervals::new(AliConfig {
            discounting,
            ..AliConfig::default()
        });
        for &c in closed.iter().rev() {
            a.close(c);
        }
        a.set_open(open);
        a
    }

    /// The inline weights equal the computed ones bit for bit.
    #[test]
    fn inline_weights_equal_computed_bit_for_bit() {
        for n in 2..=20 {
            let w = ali_weights(n);
            for (i, wi) in w.iter().enumerate() {
                assert_eq!(weight(n, i).to_bits(), wi.to_bits(), "n {n} i {i}");
            }
        }
    }

    /// n = 12 spills the closed list to the heap: same filter behaviour (oldest dropped).
    #[test]
    fn large_n_keeps_newest_n() {
        let mut a = LossIntervals::new(AliConfig {
            n: 12,
            discounting: false,
            discount_floor: 0.5,
        });
        for k in 1..=15 {
            a.close(k as f64 * 10.0);
        }
        let c: Vec<f64> = a.closed().map(|e| e.0).collect();
        let want: Vec<f64> = (4..=15).rev().map(|k| k as f64 * 10.0).collect();
        assert_eq!(c, want);
        // Uniform weights on the newest half, tapering after: the mean lies between.
        let m = a.mean_closed().unwrap();
        assert!(m > 40.0 && m < 150.0, "{m}");
    }

    /// U3: weights and the §1.4 test vectors.
    #[test]
    fn u3_weights_and_vectors() {
        let h = [100.0; 8];
        let m = |open, d| ali_with(&h, open, d).mean().unwrap();
        let got = [
            m(50.0, true),
            m(300.0, false),
            m(300.0, true),
            m(1000.0, false),
            m(1000.0, true),
        ];
        let want = [100.0, 400.0 / 3.0, 1900.0 / 13.0, 250.0, 2500.0 / 7.0];
        let worst = got
            .iter()
            .zip(want)
            .map(|(g, w)| (g - w).abs())
            .fold(0.0f64, f64::max);
        let w8 = ali_weights(8);
        let weights_ok = w8 == vec![1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
        testkit::record(
            "tfmcc/U3",
            &format!(
                "weights {w8:?}; vectors {:.4} / {:.4} / {:.4} / {:.4} / {:.4} \
                 (spec 100 / 133.3 / 146.2 / 250 / 357.1; max error {worst:.1e})",
                got[0], got[1], got[2], got[3], got[4]
            ),
            Some(weights_ok && worst < 1e-9),
            "cargo test --release -p layercast-congestion --lib u3_weights_and_vectors",
        );
        assert_eq!(ali_weights(8), vec![1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2]);
        assert!(worst < 1e-9, "{got:?}");
        assert!((m(50.0, true) - 100.0).abs() < 1e-9);
        assert!((m(300.0, false) - 133.333).abs() < 1e-3);
        assert!(
            (m(300.0, true) - 146.154).abs() < 1e-3,
            "{}",
            m(300.0, true)
        );
        assert!((m(1000.0, false) - 250.0).abs() < 1e-9);
        assert!((m(1000.0, true) - 357.143).abs() < 1e-3);
        assert!((ali_with(&h, 50.0, true).loss_event_rate() - 0.01).abs() < 1e-12);
    }

    /// U6: discount factors move with their intervals and never rise.
    #[test]
    fn u6_discount_factors_stick() {
        let mut a = ali_with(&[100.0; 8], 0.0, true);
        a.set_open(1000.0);
        assert_eq!(a.discount(), 0.5);
        a.close(1000.0);
        let f: Vec<f64> = a.closed().map(|e| e.1).collect();
        assert_eq!(f[0], 1.0);
        assert!(f[1..].iter().all(|&x| x == 0.5), "{f:?}");
        // A short interval now: no new discount, old factors stay at 0.5.
        a.set_open(10.0);
        a.close(10.0);
        let g: Vec<f64> = a.closed().map(|e| e.1).collect();
        assert_eq!(g[0..2], [1.0, 1.0]);
        assert!(g[2..].iter().all(|&x| x == 0.5), "{g:?}");
        // Another long one: the already-discounted ones go further down, never up.
        a.set_open(5000.0);
        let d = a.discount();
        a.close(5000.0);
        let h: Vec<f64> = a.closed().map(|e| e.1).collect();
        let rose = h[1..].iter().zip(g.iter()).filter(|(n, o)| n > o).count();
        let moved = h[1..]
            .iter()
            .zip(g.iter())
            .all(|(&new, &old)| (new - old * d).abs() < 1e-12);
        testkit::record(
            "tfmcc/U6",
            &format!(
                "factors after a long interval {f:?}; after a short one {g:?} (shifted with \
                 their intervals, none rose); after a second long one (discount {d:.4}) {h:?}: \
                 {rose} rose, each = old x {d:.4}: {moved}"
            ),
            Some(rose == 0 && moved && f[0] == 1.0 && g[0..2] == [1.0, 1.0]),
            "cargo test --release -p layercast-congestion --lib u6_discount_factors_stick",
        );
        for (i, (&new, &old)) in h[1..].iter().zip(g.iter()).enumerate() {
            assert!(new <= old, "factor {i} rose: {old} -> {new}");
            assert!((new - old * d).abs() < 1e-12);
        }
    }

    /// Fewer than n intervals: averaged over what there is.
    #[test]
    fn short_history_uses_first_k_weights() {
        let a = ali_with(&[50.0, 150.0], 10.0, false);
        assert!((a.mean().unwrap() - 100.0).abs() < 1e-9);
        let b = ali_with(&[80.0], 200.0, false);
        assert!((b.mean().unwrap() - 200.0).abs() < 1e-9);
    }

    fn run_periodic(h: &mut LossHistory, from: u64, to: u64, period: u64, rtt: f64) -> Vec<f64> {
        let mut ps = Vec::new();
        for seq in from..to {
            if seq % period == period - 1 {
                continue; // lost
            }
            let out = h.on_packet(seq, Time::from_millis(seq), rtt);
            if out.first_event {
                h.seed_first_interval(period as f64);
            }
            ps.push(h.loss_event_rate());
        }
        ps
    }

    /// U4: periodic loss 1/100: after 9 loss events p is exactly 0.01 and stays there.
    #[test]
    fn u4_periodic_loss() {
        let mut h = LossHistory::new(AliConfig::default(), 3);
        let mut after = Vec::new();
        for seq in 0..5000u64 {
            if seq % 100 == 99 {
                continue;
            }
            let out = h.on_packet(seq, Time::from_millis(seq * 10), 0.05);
            if out.first_event {
                // Seed with something unrelated: it must be pushed out by 9 events.
                h.seed_first_interval(7.0);
            }
            if h.counters().2 >= 9 {
                after.push(h.loss_event_rate());
            }
        }
        let max_dev = after
            .iter()
            .map(|p| (p - 0.01).abs())
            .fold(0.0f64, f64::max);
        // Zero variance: every value after the 9th event is the same number, bit for bit.
        let mut distinct: Vec<u64> = after.iter().map(|p| p.to_bits()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let mean = after.first().copied().unwrap_or(f64::NAN);
        testkit::record(
            "tfmcc/U4",
            &format!(
                "1 loss per 100 packets, 5000 packets: after the 9th loss event p = {mean:.10} \
                 over {} packets, max |p - 0.01| = {max_dev:.1e}, {} distinct value(s), i.e. \
                 zero variance (seeded with 7 packets, pushed out)",
                after.len(),
                distinct.len()
            ),
            Some(!after.is_empty() && max_dev < 1e-9 && distinct.len() == 1),
            "cargo test --release -p layercast-congestion --lib u4_periodic_loss",
        );
        assert!(!after.is_empty());
        for p in &after {
            assert!((p - 0.01).abs() < 1e-9, "{p}");
        }
        assert_eq!(distinct.len(), 1);
        // The loss at 4999 has no later packets yet, so 49 are known.
        assert_eq!(h.counters().1, 49);
    }

    /// U5: losses within one RTT of an event's first loss are one event; later ones new.
    #[test]
    fn u5_loss_event_aggregation() {
        let mut h = LossHistory::new(AliConfig::default(), 3);
        // 1 ms per packet, RTT 50 ms. Lose 10,11,12,20,40 (all within 50 ms of 10): 1 event.
        let lost = [10u64, 11, 12, 20, 40, 61, 200];
        for seq in 0..300u64 {
            if lost.contains(&seq) {
                continue;
            }
            let out = h.on_packet(seq, Time::from_millis(seq), 0.050);
            if out.first_event {
                h.seed_first_interval(100.0);
            }
        }
        // 61 is 51 ms after 10 -> new event; 200 -> new event.
        let closed: Vec<f64> = h.intervals().closed().map(|e| e.0).collect();
        testkit::record(
            "tfmcc/U5",
            &format!(
                "RTT 50 ms, 1 packet/ms, lost 10,11,12,20,40 (within 1 RTT of 10), 61 (51 ms \
                 after 10), 200: {} losses -> {} loss events (want 7 -> 3); closed intervals \
                 {closed:?}",
                h.counters().1,
                h.counters().2
            ),
            Some(h.counters().2 == 3 && h.counters().1 == 7 && closed == [139.0, 51.0, 100.0]),
            "cargo test --release -p layercast-congestion --lib u5_loss_event_aggregation",
        );
        assert_eq!(h.counters().2, 3);
        assert_eq!(h.counters().1, 7);
        assert_eq!(closed, vec![139.0, 51.0, 100.0]);
    }

    #[test]
    fn reordering_below_ndupack_is_not_loss() {
        let mut h = LossHistory::new(AliConfig::default(), 3);
        for seq in [0u64, 1, 3, 4, 2, 5, 6, 8, 9, 7, 10] {
            let out = h.on_packet(seq, Time::from_millis(seq), 0.05);
            assert_eq!(out.lost, 0);
        }
        assert!(!h.has_loss());
        let _ = run_periodic(&mut h, 11, 12, 100, 0.05);
    }

    #[test]
    fn interpolated_time_splits_a_long_hole_into_events() {
        let mut h = LossHistory::new(AliConfig::default(), 3);
        for seq in 0..10u64 {
            h.on_packet(seq, Time::from_millis(seq * 10), 0.05);
        }
        // 10..29 lost (200 ms of nominal time at 10 ms/packet), RTT 50 ms -> 4 events.
        for seq in 30..34u64 {
            let out = h.on_packet(seq, Time::from_millis(seq * 10), 0.05);
            if out.first_event {
                h.seed_first_interval(50.0);
            }
        }
        assert_eq!(h.counters().1, 20);
        assert_eq!(h.counters().2, 4);
    }

    #[test]
    fn huge_jump_resyncs() {
        let mut h = LossHistory::new(AliConfig::default(), 3);
        h.on_packet(0, Time::ZERO, 0.1);
        let out = h.on_packet(u64::MAX / 2, Time::from_millis(1), 0.1);
        assert!(out.first_event);
        assert_eq!(h.counters().2, 1);
    }

    #[test]
    fn extend_handles_wrap() {
        assert_eq!(extend_u32(None, 5), 5);
        assert_eq!(extend_u32(Some(0xffff_fff0), 3), 0x1_0000_0003);
        assert_eq!(extend_u32(Some(0x1_0000_0003), 0xffff_fff0), 0xffff_fff0);
        assert_eq!(extend_u32(Some(10), 8), 8);
    }

    /// 1-s coefficient of variation of `sqrt(s_hat)` (X ∝ p^-1/2 at low loss) and of `p`,
    /// with the filter driven packet by packet at `pps` packets/s for `secs` seconds through
    /// loss "episodes" `episode_len` packets apart, each of which starts one loss event plus,
    /// with probabilities `extra`, further events a few tens of packets later.
    fn ali_cov(
        seed: u64,
        episode_len: impl Fn(f64) -> f64,
        extra: &[f64],
        pps: usize,
        secs: usize,
    ) -> (f64, f64) {
        // A fixed 64-bit LCG: the test must be deterministic and the crate has no RNG.
        let mut state = seed;
        let mut uniform = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut a = LossIntervals::new(AliConfig::default());
        for _ in 0..8 {
            a.close(2000.0);
        }
        let mut schedule: Vec<f64> = Vec::new();
        let (mut open, mut next) = (0.0, episode_len(uniform()));
        let (mut xs, mut ps) = (Vec::new(), Vec::new());
        let (mut sx, mut sp) = (0.0, 0.0);
        for i in 0..pps * secs {
            open += 1.0;
            if open >= next {
                a.close(open);
                open = 0.0;
                if schedule.is_empty() {
                    // Next episode: its later events first (popped from the back), then
                    // the gap to the episode after it.
                    schedule.push(episode_len(uniform()));
                    for &q in extra {
                        if uniform() < q {
                            schedule.push(10.0 + 50.0 * uniform());
                        }
                    }
                }
                next = schedule.pop().unwrap_or(2000.0);
            }
            a.set_open(open);
            let m = a.mean().unwrap();
            sx += m.sqrt();
            sp += 1.0 / m;
            if (i + 1) % pps == 0 {
                xs.push(sx / pps as f64);
                ps.push(sp / pps as f64);
                sx = 0.0;
                sp = 0.0;
            }
        }
        let cov = |v: &[f64]| {
            let n = v.len() as f64;
            let m = v.iter().sum::<f64>() / n;
            (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt() / m
        };
        (cov(&xs), cov(&ps))
    }

    /// tfmcc/E3 (docs/protocols/tfrc.md, "E3"): how much 1-s variation the RFC 5348 filter
    /// itself leaves. In the testbed's E1 TFRC lost 75 packets in 120 s as 62 loss events,
    /// in ~37 TCP overflow episodes about 2000 packets apart (interval CoV ~0.5): an episode
    /// often held two or three events more than R apart (RFC 5348 §5.2 counts each), with
    /// a few tens of packets between them. Those short intervals in the n = 8 average about
    /// double the 1-s variation of p and of X here (0.19 -> 0.37 and 0.09 -> 0.16; E1
    /// measured 0.27 and 0.13); and even one event per episode leaves X's 1-s CoV near 0.09,
    /// above half of the single Linux TCP's 0.137, so E1's factor 0.5 is out of reach of
    /// the RFC's filter on that path.
    #[test]
    fn e3_split_loss_events_raise_the_variation_of_p() {
        // Episodes uniform in 2000 x [0.15, 1.85] packets (CoV 0.49); 617 packets/s as E1.
        let ep = |u: f64| 2000.0 * (0.15 + 1.7 * u);
        let (x1, p1) = ali_cov(7, ep, &[], 617, 1500);
        let (x2, p2) = ali_cov(7, ep, &[0.5, 0.15], 617, 1500);
        eprintln!(
            "1-s CoV of X / p: one event per episode {x1:.3} / {p1:.3}, split {x2:.3} / {p2:.3}"
        );
        assert!(
            (0.06..0.12).contains(&x1),
            "one event per episode: CoV X {x1}"
        );
        assert!(x1 > 0.5 * 0.137, "{x1}");
        assert!(
            x2 > 1.3 * x1 && p2 > 1.3 * p1,
            "split: X {x2} vs {x1}, p {p2} vs {p1}"
        );
        // What the E1 record measured: CoV X 0.131, p 0.268.
        assert!(
            (0.10..0.18).contains(&x2) && (0.2..0.4).contains(&p2),
            "{x2} {p2}"
        );
    }
}
