//! What the agents record during a run, and the metric definitions computed from it
//! (`era.md` §2.1, `plm.md` §6.4).
//!
//! A [`Monitor`] belongs to one receiver (a layered-session receiver, a TCP sink, a CBR sink).
//! It keeps bytes, packets received and packets lost per interval, and the exact trace of the
//! subscription level, so level-based metrics (time to a level, convergence, layer changes) are
//! exact rather than binned.

use congestion::Time;
use serde::Serialize;

/// Index of a monitor.
pub type MonId = usize;

/// What kind of flow a monitor watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MonKind {
    Layered,
    Tcp,
    Cbr,
    Onoff,
    Tfmcc,
    /// A TFRC flow: the receiver's goodput and the sender's feedback log (`tfrc_log`).
    Tfrc,
    /// A link probe (`agents::probe`): received/lost = packets the link sent/dropped.
    Queue,
}

/// One receiver's record.
#[derive(Clone, Debug, Serialize)]
pub struct Monitor {
    /// `flow` for single-receiver flows, `flow/receiver` for layered receivers.
    pub name: String,
    /// The flow's name.
    pub flow: String,
    pub kind: MonKind,
    /// When the receiver started (s), if it did.
    pub start: Option<f64>,
    /// Bytes, packets received and packets detected lost, per interval.
    pub bytes: Vec<u64>,
    pub received: Vec<u64>,
    pub lost: Vec<u64>,
    /// Subscription level changes (time s, layers held), layered receivers only.
    pub levels: Vec<(f64, u8)>,
    /// Cumulative rate of `k` layers, kbit/s (`ladder_kbps[k]`, `[0] = 0`).
    pub ladder_kbps: Vec<f64>,
    /// Layer events (one per layer joined or left) and change events (one per level change).
    pub layer_events: u64,
    pub change_events: u64,
    /// The controller's decision log (layered receivers).
    #[serde(skip)]
    pub decisions: Vec<congestion::Decision>,
    /// TFMCC receivers: the receiver ID the sender sees in reports.
    #[serde(skip)]
    pub rid: Option<u32>,
    /// TFMCC sender: completed feedback rounds (start s, duration s, non-CLR reports, CLR
    /// reports), the spec's "feedback messages per round".
    #[serde(skip)]
    pub rounds: Vec<(f64, f64, u32, u32)>,
    /// TFMCC sender: CLR changes (time s, receiver ID, 0 = none).
    #[serde(skip)]
    pub clr: Vec<(f64, u32)>,
    /// TFMCC sender: its controller's sending rate `X` (time s, kbit/s) at every packet
    /// where it changed: the "sending rate" of the spec, free of any binning.
    #[serde(skip)]
    pub rate_trace: Vec<(f64, f64)>,
    /// Link probes: sum of queue-length samples (packets) and number of samples, per interval.
    #[serde(skip)]
    pub queue_sum: Vec<u64>,
    #[serde(skip)]
    pub queue_n: Vec<u64>,
    /// TFMCC sender: (time s, `R_max` s, slow start, rate X kbit/s), logged whenever one of
    /// them changes, checked after every report and every timer (so, unlike `rate_trace`,
    /// changes made by timers are timed exactly, e.g. no-feedback halvings at low rates).
    #[serde(skip)]
    pub tfmcc_state: Vec<(f64, f64, bool, f64)>,
    /// TFMCC sender: time (s) of the first report from each receiver ID.
    #[serde(skip)]
    pub first_report: std::collections::BTreeMap<u32, f64>,
    /// TFMCC sender: time (s) of the latest report from each receiver ID (S18).
    #[serde(skip)]
    pub last_report: std::collections::BTreeMap<u32, f64>,
    /// TFRC sender: (time s, allowed rate X B/s, reported p, RTT s) at every feedback.
    #[serde(skip)]
    pub tfrc_log: Vec<(f64, f64, f64, f64)>,
    /// TFMCC receivers: when the receiver first had a measured RTT (S19).
    #[serde(skip)]
    pub first_rtt_at: Option<f64>,
    /// Link probes: every sample's queueing delay (time s, virtual waiting time, ms).
    #[serde(skip)]
    pub queue_delay_ms: Vec<(f64, f64)>,
}

/// All monitors of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Monitors {
    /// Interval of the time series, seconds.
    pub interval: f64,
    /// The same in nanoseconds (computed on first use).
    #[serde(skip)]
    pub interval_ns: u64,
    pub list: Vec<Monitor>,
}

impl Monitors {
    /// A new monitor.
    pub fn add(
        &mut self,
        name: String,
        flow: String,
        kind: MonKind,
        ladder_kbps: Vec<f64>,
    ) -> MonId {
        self.list.push(Monitor {
            name,
            flow,
            kind,
            start: None,
            bytes: Vec::new(),
            received: Vec::new(),
            lost: Vec::new(),
            levels: Vec::new(),
            ladder_kbps,
            layer_events: 0,
            change_events: 0,
            decisions: Vec::new(),
            rid: None,
            rounds: Vec::new(),
            clr: Vec::new(),
            tfmcc_state: Vec::new(),
            first_report: std::collections::BTreeMap::new(),
            last_report: std::collections::BTreeMap::new(),
            tfrc_log: Vec::new(),
            first_rtt_at: None,
            rate_trace: Vec::new(),
            queue_sum: Vec::new(),
            queue_n: Vec::new(),
            queue_delay_ms: Vec::new(),
        });
        self.list.len() - 1
    }

    #[inline]
    fn bin(&mut self, id: MonId, now: Time) -> (usize, &mut Monitor) {
        if self.interval_ns == 0 {
            self.interval_ns = ((self.interval.max(1e-6)) * 1e9).round() as u64;
        }
        let i = (now.as_nanos() / self.interval_ns) as usize;
        let m = &mut self.list[id];
        if m.bytes.len() <= i {
            m.bytes.resize(i + 1, 0);
            m.received.resize(i + 1, 0);
            m.lost.resize(i + 1, 0);
        }
        (i, m)
    }

    /// A packet of `size` bytes was received.
    #[inline]
    pub fn packet(&mut self, id: MonId, now: Time, size: u32) {
        let (i, m) = self.bin(id, now);
        m.bytes[i] += u64::from(size);
        m.received[i] += 1;
    }

    /// The interval index of `now` and the end of that interval (ns): agents with many
    /// receivers accumulate a whole interval locally and hand it over with [`Self::add_bin`].
    #[inline]
    pub fn bin_of(&mut self, now: Time) -> (usize, u64) {
        if self.interval_ns == 0 {
            self.interval_ns = ((self.interval.max(1e-6)) * 1e9).round() as u64;
        }
        let i = now.as_nanos() / self.interval_ns;
        (i as usize, (i + 1) * self.interval_ns)
    }

    /// Adds `bytes` and `received` packets to interval `i` of monitor `id` (what `packet`
    /// would have added, one packet at a time).
    pub fn add_bin(&mut self, id: MonId, i: usize, bytes: u64, received: u64) {
        let m = &mut self.list[id];
        if m.bytes.len() <= i {
            m.bytes.resize(i + 1, 0);
            m.received.resize(i + 1, 0);
            m.lost.resize(i + 1, 0);
        }
        m.bytes[i] += bytes;
        m.received[i] += received;
    }

    /// A link probe's queue sample (packets).
    pub fn queue_sample(&mut self, id: MonId, now: Time, packets: u64) {
        let (i, m) = self.bin(id, now);
        if m.queue_sum.len() <= i {
            m.queue_sum.resize(i + 1, 0);
            m.queue_n.resize(i + 1, 0);
        }
        m.queue_sum[i] += packets;
        m.queue_n[i] += 1;
    }

    /// A link probe: the link sent `packets` packets of `bytes` bytes in total since the last
    /// sample.
    pub fn link_traffic(&mut self, id: MonId, now: Time, packets: u64, bytes: u64) {
        let (i, m) = self.bin(id, now);
        m.bytes[i] += bytes;
        m.received[i] += packets;
    }

    /// `n` packets were detected lost.
    pub fn lost(&mut self, id: MonId, now: Time, n: u64) {
        let (i, m) = self.bin(id, now);
        m.lost[i] += n;
    }

    /// The receiver started.
    pub fn started(&mut self, id: MonId, now: Time) {
        let m = &mut self.list[id];
        if m.start.is_none() {
            m.start = Some(now.as_secs_f64());
        }
    }

    /// The subscription level is now `layers`.
    pub fn level(&mut self, id: MonId, now: Time, layers: u8) {
        let m = &mut self.list[id];
        let prev = m.levels.last().map_or(0, |l| l.1);
        if prev == layers && !m.levels.is_empty() {
            return;
        }
        m.layer_events += u64::from(prev.abs_diff(layers));
        if !m.levels.is_empty() || layers != 0 {
            m.change_events += 1;
        }
        m.levels.push((now.as_secs_f64(), layers));
    }
}

impl Monitor {
    /// Lowest rate of any whole interval inside [t0, t1), kbit/s (NaN if none fits).
    pub fn min_interval_kbps(&self, interval: f64, t0: f64, t1: f64) -> f64 {
        let first = (t0 / interval).ceil() as usize;
        let last = (t1 / interval).floor() as usize;
        (first..last)
            .map(|i| self.bytes.get(i).copied().unwrap_or(0) as f64 * 8.0 / interval / 1000.0)
            .fold(f64::NAN, f64::min)
    }

    /// Highest rate of any whole interval inside [t0, t1), kbit/s (NaN if none fits).
    pub fn max_interval_kbps(&self, interval: f64, t0: f64, t1: f64) -> f64 {
        let first = (t0 / interval).ceil() as usize;
        let last = (t1 / interval).floor() as usize;
        (first..last)
            .map(|i| self.bytes.get(i).copied().unwrap_or(0) as f64 * 8.0 / interval / 1000.0)
            .fold(f64::NAN, f64::max)
    }

    /// Highest controller rate `X` in force during [t0, t1), kbit/s (TFMCC senders; NaN
    /// without a trace).
    pub fn max_rate_kbps(&self, t0: f64, t1: f64) -> f64 {
        let before = self.rate_trace.iter().take_while(|r| r.0 <= t0).last();
        before
            .into_iter()
            .chain(self.rate_trace.iter().filter(|r| r.0 > t0 && r.0 < t1))
            .map(|r| r.1)
            .fold(f64::NAN, f64::max)
    }

    /// Mean non-CLR reports per completed feedback round, over the rounds that started in
    /// [t0, t1) and ended by t1 (TFMCC sender monitors); NaN without such a round.
    pub fn feedback_per_round(&self, t0: f64, t1: f64) -> f64 {
        let v: Vec<f64> = self
            .rounds
            .iter()
            .filter(|r| r.0 >= t0 && r.0 + r.1 <= t1)
            .map(|r| f64::from(r.2))
            .collect();
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }

    /// The CLR at time `t` (0 = none) from a sender's CLR log.
    pub fn clr_at(&self, t: f64) -> u32 {
        self.clr
            .iter()
            .take_while(|c| c.0 <= t)
            .last()
            .map_or(0, |c| c.1)
    }

    /// Time from `after` until receiver `rid` is the CLR in this sender's log (0 if it
    /// already is at `after`), infinite if never before `end`.
    pub fn time_to_clr(&self, rid: u32, after: f64, end: f64) -> f64 {
        if self.clr_at(after) == rid {
            return 0.0;
        }
        self.clr
            .iter()
            .find(|c| c.0 > after && c.0 <= end && c.1 == rid)
            .map_or(f64::INFINITY, |c| c.0 - after)
    }

    /// Fraction of [t0, t1) during which the CLR is `rid`.
    pub fn clr_share(&self, rid: u32, t0: f64, t1: f64) -> f64 {
        if t1 <= t0 {
            return f64::NAN;
        }
        let mut cur = self.clr_at(t0);
        let mut at = t0;
        let mut held = 0.0;
        for c in self.clr.iter().filter(|c| c.0 > t0 && c.0 < t1) {
            if cur == rid {
                held += c.0 - at;
            }
            cur = c.1;
            at = c.0;
        }
        if cur == rid {
            held += t1 - at;
        }
        held / (t1 - t0)
    }

    /// Bytes in [t0, t1), with partial intervals counted pro rata.
    pub fn bytes_in(&self, interval: f64, t0: f64, t1: f64) -> f64 {
        sum_binned(&self.bytes, interval, t0, t1)
    }

    /// Mean received rate over [t0, t1), kbit/s.
    pub fn throughput_kbps(&self, interval: f64, t0: f64, t1: f64) -> f64 {
        if t1 <= t0 {
            return f64::NAN;
        }
        self.bytes_in(interval, t0, t1) * 8.0 / 1000.0 / (t1 - t0)
    }

    /// Packets lost and received in [t0, t1).
    pub fn loss_counts(&self, interval: f64, t0: f64, t1: f64) -> (f64, f64) {
        (
            sum_binned(&self.lost, interval, t0, t1),
            sum_binned(&self.received, interval, t0, t1),
        )
    }

    /// Mean of the link probe's queue samples in `[t0, t1)` (whole intervals), packets.
    pub fn mean_queue(&self, interval: f64, t0: f64, t1: f64) -> f64 {
        let a = (t0 / interval).round().max(0.0) as usize;
        let b = ((t1 / interval).round().max(0.0) as usize).min(self.queue_sum.len());
        let (mut sum, mut n) = (0u64, 0u64);
        for i in a..b {
            sum += self.queue_sum[i];
            n += self.queue_n[i];
        }
        if n == 0 {
            f64::NAN
        } else {
            sum as f64 / n as f64
        }
    }

    /// Layers held at time `t`.
    pub fn level_at(&self, t: f64) -> u8 {
        let mut l = 0;
        for &(at, k) in &self.levels {
            if at > t {
                break;
            }
            l = k;
        }
        l
    }

    /// Cumulative nominal rate of `layers` layers, kbit/s.
    pub fn rate_of(&self, layers: u8) -> f64 {
        self.ladder_kbps
            .get(layers as usize)
            .copied()
            .unwrap_or_else(|| self.ladder_kbps.last().copied().unwrap_or(0.0))
    }

    /// Level changes as (time, layers), starting with the level at `t0`, clipped to [t0, t1].
    fn segments(&self, t0: f64, t1: f64) -> Vec<(f64, f64, u8)> {
        let mut out = Vec::new();
        let mut cur_t = t0;
        let mut cur = self.level_at(t0);
        for &(at, k) in &self.levels {
            if at <= t0 {
                continue;
            }
            if at >= t1 {
                break;
            }
            out.push((cur_t, at, cur));
            cur_t = at;
            cur = k;
        }
        out.push((cur_t, t1, cur));
        out
    }

    /// Time-weighted mean number of layers held over [t0, t1].
    pub fn mean_layers(&self, t0: f64, t1: f64) -> f64 {
        if t1 <= t0 {
            return f64::NAN;
        }
        self.segments(t0, t1)
            .iter()
            .map(|&(a, b, k)| (b - a) * f64::from(k))
            .sum::<f64>()
            / (t1 - t0)
    }

    /// Share of [t0, t1] spent holding at least `min` layers (0..1).
    pub fn time_at_level(&self, t0: f64, t1: f64, min: u8) -> f64 {
        if t1 <= t0 {
            return f64::NAN;
        }
        self.segments(t0, t1)
            .iter()
            .filter(|s| s.2 >= min)
            .map(|&(a, b, _)| b - a)
            .sum::<f64>()
            / (t1 - t0)
    }

    /// Minimum and maximum level held during [t0, t1].
    pub fn level_range(&self, t0: f64, t1: f64) -> (u8, u8) {
        let s = self.segments(t0, t1);
        let min = s.iter().map(|x| x.2).min().unwrap_or(0);
        let max = s.iter().map(|x| x.2).max().unwrap_or(0);
        (min, max)
    }

    /// Change events (level changes) strictly inside (t0, t1].
    pub fn changes_in(&self, t0: f64, t1: f64) -> u64 {
        let mut prev = self.level_at(t0);
        let mut n = 0;
        for &(at, k) in &self.levels {
            if at > t0 && at <= t1 && k != prev {
                n += 1;
                prev = k;
            }
        }
        n
    }

    /// First time ≥ `after` at which `cond(layers, subscribed kbit/s)` holds, minus `after`;
    /// infinite if never before `end`.
    pub fn time_until(&self, after: f64, end: f64, cond: impl Fn(u8, f64) -> bool) -> f64 {
        for (a, _, k) in self.segments(after, end) {
            if cond(k, self.rate_of(k)) {
                return a - after;
            }
        }
        f64::INFINITY
    }

    /// `era.md` §2.1 [R]: the first time after `after` from which the level stays within one
    /// layer of the final level (the level at `end`) for at least `hold` seconds, minus `after`.
    pub fn convergence_time(&self, after: f64, end: f64, hold: f64) -> f64 {
        let fin = i32::from(self.level_at(end));
        let mut run_start: Option<f64> = None;
        for (a, b, k) in self.segments(after, end) {
            if (i32::from(k) - fin).abs() <= 1 {
                let s = *run_start.get_or_insert(a);
                if b - s >= hold || b >= end {
                    return s - after;
                }
            } else {
                run_start = None;
            }
        }
        f64::INFINITY
    }

    /// Largest per-interval loss ratio lost/(lost+received) over intervals inside [t0, t1),
    /// intervals with no packets count as 0.
    pub fn max_interval_loss(&self, interval: f64, t0: f64, t1: f64) -> f64 {
        let i0 = (t0 / interval).floor() as usize;
        let i1 = ((t1 / interval).ceil() as usize).min(self.lost.len());
        (i0..i1)
            .map(|i| {
                let l = self.lost[i] as f64;
                let r = self.received[i] as f64;
                if l + r > 0.0 {
                    l / (l + r)
                } else {
                    0.0
                }
            })
            .fold(0.0, f64::max)
    }
}

fn sum_binned(v: &[u64], interval: f64, t0: f64, t1: f64) -> f64 {
    if t1 <= t0 || v.is_empty() {
        return 0.0;
    }
    let i0 = (t0 / interval).floor() as usize;
    let i1 = (t1 / interval).ceil() as usize;
    let mut s = 0.0;
    for (i, &x) in v.iter().enumerate().take(i1).skip(i0) {
        let a = i as f64 * interval;
        let b = a + interval;
        let overlap = (b.min(t1) - a.max(t0)).max(0.0) / interval;
        s += x as f64 * overlap;
    }
    s
}

/// Jain's index `(Σx)² / (n·Σx²)` (`era.md` Eq. 4-1, Q).
pub fn jain(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if n == 0.0 || s2 == 0.0 {
        return f64::NAN;
    }
    s * s / (n * s2)
}

/// Widmer's intra-protocol fairness `min/max` (`era.md` Eq. 4-2, I).
pub fn min_max_ratio(x: &[f64]) -> f64 {
    let mn = x.iter().copied().fold(f64::INFINITY, f64::min);
    let mx = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if x.is_empty() || mx <= 0.0 {
        return f64::NAN;
    }
    mn / mx
}

/// Mean and 95% confidence half-width with Student's t (`era.md` §2.2), `n-1` degrees of
/// freedom; half-width 0 for a single sample. Non-finite samples are kept: they poison the
/// mean, which is what a missed level (infinite time) should do.
pub fn mean_ci95(x: &[f64]) -> (f64, f64) {
    let n = x.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let m = x.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (m, 0.0);
    }
    let var = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1) as f64;
    (m, t_975(n - 1) * (var / n as f64).sqrt())
}

/// Two-sided 95% Student t quantile for `df` degrees of freedom.
fn t_975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if df == 0 {
        f64::NAN
    } else if df <= 30 {
        T[df - 1]
    } else {
        1.96
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_and_ratio_match_the_spec_vectors() {
        // active-networks.md §5.1 item 1.
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 1.0, 0.0, 0.0]) - 0.5).abs() < 1e-12);
        assert!((jain(&[1.0, 0.7]) - 0.9698).abs() < 1e-4);
        assert!((min_max_ratio(&[100.0, 50.0, 80.0]) - 0.5).abs() < 1e-12);
        // era.md §2.2: n = 20 uses t = 2.093.
        let x: Vec<f64> = (0..20).map(|i| i as f64).collect();
        let (m, h) = mean_ci95(&x);
        assert!((m - 9.5).abs() < 1e-12);
        let sd = (x.iter().map(|v| (v - 9.5f64).powi(2)).sum::<f64>() / 19.0).sqrt();
        assert!((h - 2.093 * sd / 20f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn level_metrics_are_exact() {
        let mut ms = Monitors {
            interval: 1.0,
            ..Monitors::default()
        };
        let ladder: Vec<f64> = (0..=20).map(|k| 20.0 * k as f64).collect();
        let id = ms.add("r".into(), "s".into(), MonKind::Layered, ladder);
        ms.level(id, Time::from_millis(3000), 1);
        ms.level(id, Time::from_millis(3500), 5);
        ms.level(id, Time::from_millis(4200), 15);
        ms.level(id, Time::from_millis(9000), 14);
        ms.level(id, Time::from_millis(10_000), 15);
        let m = &ms.list[id];
        assert!((m.time_until(3.0, 80.0, |k, _| k >= 15) - 1.2).abs() < 1e-9);
        assert!((m.time_until(3.0, 80.0, |_, r| r >= 100.0) - 0.5).abs() < 1e-9);
        assert_eq!(m.time_until(3.0, 80.0, |k, _| k >= 16), f64::INFINITY);
        assert_eq!(m.level_range(5.0, 80.0), (14, 15));
        assert_eq!(m.changes_in(5.0, 80.0), 2);
        assert_eq!(m.change_events, 5);
        assert_eq!(m.layer_events, 1 + 4 + 10 + 1 + 1);
        // 15 layers over [10, 20], 14 over [9, 10], 15 over [8, 9]: mean over [8, 20] = 14.9166…
        assert!((m.mean_layers(8.0, 20.0) - (11.0 * 15.0 + 14.0) / 12.0).abs() < 1e-9);
        // Within one layer of 15 from 4.2 s on, held ≥ 5 s.
        assert!((m.convergence_time(3.0, 80.0, 5.0) - 1.2).abs() < 1e-9);
    }

    #[test]
    fn binned_sums_prorate_partial_intervals() {
        let v = vec![100, 100, 100, 100];
        assert!((sum_binned(&v, 1.0, 0.5, 2.5) - 200.0).abs() < 1e-9);
        assert!((sum_binned(&v, 1.0, 0.0, 10.0) - 400.0).abs() < 1e-9);
    }
}
