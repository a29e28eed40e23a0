//! Which spatial and temporal layers a browser gets, from its bandwidth estimate.
//!
//! The estimate is str0m's send-side estimate from the browser's transport-wide congestion
//! control feedback. Like mediasoup's SVC consumer the estimate is first turned into a
//! "virtual" rate by the loss the browser reports; unlike mediasoup it is never raised above
//! the estimate (retransmissions and key pictures need the headroom on a path that is already
//! full), and from `loss_low` on only the share that gets through counts (`1 - loss`, at most
//! halved). The choice is the best candidate whose rate, with packet overhead, fits the
//! virtual rate.
//!
//! Switch points have hysteresis, because str0m's delay-based estimate wanders on a clean path
//! (dips of a few hundred milliseconds to well under the current layers after a key picture's
//! burst, see docs/edge.md "Layer choice"), and every spatial switch costs the viewer a
//! resolution change and a burst of repair. A down-switch happens at once when the shortfall
//! is deep (virtual rate below `deep_down` of the current point) or the browser reports loss
//! (the path is really full); a shallower shortfall must last `down_hold` first. Up-switches
//! need a margin (`up_margin`, wider for a higher spatial layer: `spatial_up_margin`), and after a spatial down-switch caused by the estimate a
//! spatial up-switch waits `spatial_up_hold` (so a browser does not bounce between
//! resolutions while the estimate recovers).
//!
//! Candidates: every (s, t) whose cells the edge receives, except upper spatial layers below
//! `min_upper_fps`: a viewer is better served by a smooth lower resolution than by a larger
//! picture at a few frames per second.

use crate::layout::VideoLayout;
use std::time::{Duration, Instant};

/// A (spatial, temporal) operating point: spatial layers `0..=spatial`, temporal `0..=temporal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Choice {
    pub spatial: u8,
    pub temporal: u8,
}

/// Tuning of the selection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelectConfig {
    /// Multiplies media rates for RTP/SRTP/UDP/IP headers and header extensions.
    pub overhead: f64,
    /// An up-switch needs the new rate within this share of the virtual rate.
    pub up_margin: f64,
    /// The same for an up-switch to a higher spatial layer: it starts at a sync frame (an
    /// upper-layer frame predicted from the base only, larger than the frames around it),
    /// and on a path the estimate nearly fills that burst, sent at 1.1 × the estimate by
    /// str0m's pacer, reads as congestion: the estimate falls to 0.85 × what was sent before
    /// the switch, below the point the browser came from.
    pub spatial_up_margin: f64,
    /// Spatial layers above 0 are not chosen at a lower frame rate than this.
    pub min_upper_fps: f64,
    /// After a spatial down-switch by the estimate, no spatial up-switch for this long.
    pub spatial_up_hold: Duration,
    /// Loss from which the virtual rate is the share of the estimate that gets through.
    pub loss_low: f32,
    /// A shortfall down to this share of the current point's wire rate, without loss, must
    /// last `down_hold` before a down-switch; a deeper one switches at once.
    pub deep_down: f64,
    /// How long a shortfall without congestion signs must last before a spatial down-switch
    /// (and a shallow one before any down-switch).
    pub down_hold: Duration,
    /// An RTT this far above the lowest one seen confirms a shortfall (a queue is building at
    /// the bottleneck), like loss does.
    pub rtt_rise: Duration,
    /// `desired` is only sent to str0m again when the top point's rate moved by more than this
    /// share: each raise above the estimate starts allocation probes.
    pub desired_tolerance: f64,
    /// Padding fills up to the next layer, but not beyond this share of the estimate's video
    /// part.
    pub pad_share: f64,
    /// A pacer backlog this long (the oldest frame written to str0m still not sent) while the
    /// pacer sends slower than the current layers need is congestion: str0m's estimate
    /// already fell below the layers, ahead of its smoothed estimate event, and every frame
    /// behind it waits.
    pub backlog_max: Duration,
    /// ... and only while the pacing rate's video part is under this share of the current
    /// point's wire rate.
    pub backlog_share: f64,
    /// Up-switches go one candidate at a time, at least this long apart and twice this long
    /// after a down-switch: padding fills up to the next candidate only, so the acknowledged rate
    /// str0m falls back to (0.85 × it) on an overuse signal is the next candidate's, not the
    /// current one's; a jump over several candidates left the estimate to collapse to 0.85 ×
    /// the old rate, far under the new one.
    pub up_dwell: Duration,
    /// After a down-switch with congestion, while below the top, an allocation probe is asked
    /// of str0m once the browser has been free of congestion for `probe_after`, then every
    /// `probe_interval` (doubled after each probe that did not raise the estimate, up to
    /// `probe_interval_max`; at once when the estimate grew 10 % since the last probe by
    /// itself), for `recovery` at most: without it str0m's estimate climbs from
    /// a step's low back up by a few percent a second, too slowly to restore the layers.
    pub probe_after: Duration,
    pub probe_interval: Duration,
    pub probe_interval_max: Duration,
    pub recovery: Duration,
}

impl Default for SelectConfig {
    fn default() -> Self {
        SelectConfig {
            overhead: 1.08,
            up_margin: 0.85,
            spatial_up_margin: 0.7,
            min_upper_fps: 14.0,
            spatial_up_hold: Duration::from_secs(4),
            loss_low: 0.02,
            deep_down: 0.6,
            down_hold: Duration::from_millis(1500),
            rtt_rise: Duration::from_millis(50),
            desired_tolerance: 0.25,
            pad_share: 0.9,
            backlog_max: Duration::from_millis(250),
            backlog_share: 0.8,
            up_dwell: Duration::from_millis(500),
            probe_after: Duration::from_secs(2),
            probe_interval: Duration::from_secs(2),
            probe_interval_max: Duration::from_secs(8),
            recovery: Duration::from_secs(60),
        }
    }
}

/// One candidate and its media rate, bit/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub choice: Choice,
    pub rate_bps: f64,
}

/// The candidates for a layout, by ascending rate, limited to spatial layers `0..=top`.
/// `rate` gives the rate of an operating point (measured, else announced).
pub fn candidates(
    layout: &VideoLayout,
    top: u8,
    conf: &SelectConfig,
    rate: impl Fn(u8, u8) -> f64,
) -> Vec<Candidate> {
    let mut v = Vec::new();
    for s in 0..=top.min(layout.spatial.saturating_sub(1)) {
        for t in 0..layout.temporal {
            if s > 0 && layout.fps_of(t) < conf.min_upper_fps && t + 1 < layout.temporal {
                continue;
            }
            v.push(Candidate {
                choice: Choice {
                    spatial: s,
                    temporal: t,
                },
                rate_bps: rate(s, t),
            });
        }
    }
    v.sort_by(|a, b| a.rate_bps.total_cmp(&b.rate_bps));
    v
}

/// Why the target changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The estimate (with loss) no longer carries the current layers.
    Down,
    /// The estimate carries more.
    Up,
    /// The layers the edge receives changed.
    Available,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Down => "bwe_down",
            Reason::Up => "bwe_up",
            Reason::Available => "available",
        }
    }
}

/// Per-browser selection state.
#[derive(Debug, Clone)]
pub struct Selector {
    conf: SelectConfig,
    current: Option<Choice>,
    last_spatial_down: Option<Instant>,
    /// Since when the virtual rate has been below the current point's spatial layer.
    short_since: Option<Instant>,
    /// The lowest RTT seen: the path's base, against which a building queue shows.
    min_rtt: Option<Duration>,
    /// The (minimum, desired) rates last given to str0m.
    sent_targets: Option<(f64, f64)>,
    /// The last switch and its direction (up-switches wait `up_dwell` after it).
    last_switch: Option<(Instant, Reason)>,
    /// The last update with a congestion sign (loss, RTT rise, pacer backlog).
    last_congested: Option<Instant>,
    /// Restore probing after a congested down-switch (`SelectConfig::probe_after`).
    probe: Option<Probing>,
}

/// Restore probing state.
#[derive(Debug, Clone, Copy)]
struct Probing {
    until: Instant,
    next: Instant,
    interval: Duration,
    /// The estimate when the last probe was asked for.
    estimate_at_probe: Option<f64>,
    /// `desired` is sent raised by 2 % (a raise above the estimate is what starts an
    /// allocation probe in str0m); the next probe first lowers it again.
    raised: bool,
    /// The estimate the selector last saw.
    estimate: f64,
}

impl Selector {
    pub fn new(conf: SelectConfig) -> Self {
        Selector {
            conf,
            current: None,
            last_spatial_down: None,
            short_since: None,
            min_rtt: None,
            sent_targets: None,
            last_switch: None,
            last_congested: None,
            probe: None,
        }
    }

    pub fn current(&self) -> Option<Choice> {
        self.current
    }

    /// Whether the layers went down for the estimate within `within` before `now`.
    pub fn went_down_within(&self, now: Instant, within: Duration) -> bool {
        self.last_switch
            .is_some_and(|(t, r)| r == Reason::Down && now <= t + within)
    }

    /// The rate the estimate must carry for candidate `c` (wire bits).
    pub fn wire_rate(&self, c: &Candidate) -> f64 {
        c.rate_bps * self.conf.overhead
    }

    /// The part of the estimate left for video when the audio payload takes `audio_bps`: each
    /// 20-ms Opus packet carries about 60 bytes of RTP/SRTP/UDP/IP headers, so audio costs
    /// its payload rate plus 24 kbit/s.
    pub fn video_share(&self, estimate_bps: f64, audio_bps: f64) -> f64 {
        let audio = if audio_bps > 0.0 {
            audio_bps + 24_000.0
        } else {
            0.0
        };
        (estimate_bps - audio).max(0.0)
    }

    /// The virtual rate: the estimate adjusted by the loss the browser reports.
    pub fn virtual_rate(&self, estimate_bps: f64, loss: f32) -> f64 {
        if loss < self.conf.loss_low {
            estimate_bps
        } else {
            estimate_bps * (1.0 - f64::from(loss.min(0.5)))
        }
    }

    /// Re-evaluates from the estimate, the loss and the RTT the browser reports; returns the
    /// new target if it changed. `paced` is the video part of str0m's pacing rate when its
    /// pacer holds a backlog of `backlog_max` or more (None otherwise): a congestion sign, and
    /// a bound on what the layers may take until the backlog is gone.
    pub fn update(
        &mut self,
        now: Instant,
        estimate_bps: f64,
        loss: f32,
        rtt: Option<Duration>,
        paced: Option<f64>,
        cands: &[Candidate],
    ) -> Option<(Choice, Reason)> {
        let first = cands.first()?;
        if let Some(r) = rtt {
            self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        }
        let mut v = self.virtual_rate(estimate_bps, loss);
        // A backlog is congestion only while the pacer sends well below what the current
        // point needs (`backlog_share`): a key picture's burst also waits in the pacer, at a
        // pacing rate that carries the layers or nearly (a shallow dip, which the down-hold
        // is for).
        let paced = paced.filter(|&p| {
            self.current
                .and_then(|c| cands.iter().find(|x| x.choice == c))
                .is_some_and(|c| p < self.wire_rate(c) * self.conf.backlog_share)
        });
        if let Some(p) = paced {
            v = v.min(p);
        }
        if let Some(pr) = &mut self.probe {
            pr.estimate = estimate_bps;
        }
        let congested = paced.is_some()
            || loss >= self.conf.loss_low
            || rtt
                .zip(self.min_rtt)
                .is_some_and(|(r, m)| r >= m + self.conf.rtt_rise);
        if congested {
            self.last_congested = Some(now);
        }
        let overhead = self.conf.overhead;
        let fits = |c: &Candidate, share: f64| c.rate_bps * overhead <= v * share;
        let best_down = cands
            .iter()
            .rev()
            .find(|c| fits(c, 1.0))
            .unwrap_or(first)
            .choice;
        let Some(cur) = self.current else {
            self.current = Some(best_down);
            self.last_switch = Some((now, Reason::Up));
            return Some((best_down, Reason::Up));
        };
        let cur_rate = cands.iter().find(|c| c.choice == cur);
        let Some(cur_c) = cur_rate else {
            // The current point is no longer offered (the edge lost layers upstream).
            self.current = Some(best_down);
            self.last_switch = Some((now, Reason::Available));
            return Some((best_down, Reason::Available));
        };
        if fits(cur_c, 1.0) || best_down == cur {
            self.short_since = None;
        } else {
            let since = *self.short_since.get_or_insert(now);
            let held = now >= since + self.conf.down_hold;
            let deep = v < self.wire_rate(cur_c) * self.conf.deep_down;
            let to = if congested || held {
                best_down
            } else if deep {
                // Without signs of congestion a deep dip first costs frame rate, not
                // resolution, when a lower temporal point of the current spatial layer fits;
                // when none does, the spatial layer goes at once (str0m's pacer sends at the
                // estimate, so a point above it would queue there).
                cands
                    .iter()
                    .rev()
                    .filter(|c| c.choice.spatial == cur.spatial && c.rate_bps < cur_c.rate_bps)
                    .find(|c| fits(c, 1.0))
                    .map_or(best_down, |c| c.choice)
            } else {
                return None;
            };
            if to == cur {
                return None;
            }
            if to.spatial < cur.spatial {
                self.last_spatial_down = Some(now);
                self.short_since = None;
            }
            if congested || deep {
                self.start_recovery(now);
            }
            self.current = Some(to);
            self.last_switch = Some((now, Reason::Down));
            return Some((to, Reason::Down));
        }
        let dwell = self.last_switch.is_some_and(|(t, r)| {
            let d = self.conf.up_dwell;
            now < t + if r == Reason::Up { d } else { d * 2 }
        });
        if paced.is_some() || dwell {
            return None;
        }
        let hold = self
            .last_spatial_down
            .is_some_and(|t| now < t + self.conf.spatial_up_hold);
        // One candidate up at a time (`up_dwell`): the lowest one above the current point that
        // the holds allow, if it fits with its margin.
        let up = cands
            .iter()
            .filter(|c| c.rate_bps > cur_c.rate_bps)
            .find(|c| !(hold && c.choice.spatial > cur.spatial))
            .filter(|c| {
                let m = if c.choice.spatial > cur.spatial {
                    self.conf.spatial_up_margin
                } else {
                    self.conf.up_margin
                };
                fits(c, m)
            })
            .map(|c| c.choice);
        match up {
            Some(u) if u != cur => {
                self.current = Some(u);
                self.last_switch = Some((now, Reason::Up));
                Some((u, Reason::Up))
            }
            _ => None,
        }
    }

    fn start_recovery(&mut self, now: Instant) {
        let interval = self.conf.probe_interval;
        let raised = self.probe.is_some_and(|p| p.raised);
        self.probe = Some(Probing {
            until: now + self.conf.recovery,
            next: now + self.conf.probe_after,
            interval,
            estimate_at_probe: None,
            raised,
            estimate: 0.0,
        });
    }

    /// Whether a restore probe is due now (see `SelectConfig::probe_after`); moves the
    /// probing schedule on when it is.
    fn probe_due(&mut self, now: Instant, at_top: bool) -> bool {
        let conf = self.conf;
        let calm = self
            .last_congested
            .is_none_or(|t| now >= t + conf.probe_after);
        let Some(p) = &mut self.probe else {
            return false;
        };
        if at_top || now >= p.until {
            self.probe = None;
            return false;
        }
        // The estimate grew by itself since the last probe (the path may have room again):
        // probe now rather than at the backed-off time.
        let growing = p.estimate_at_probe.is_some_and(|e| p.estimate >= e * 1.1);
        if !calm || (now < p.next && !growing) {
            return false;
        }
        if let Some(e) = p.estimate_at_probe {
            p.interval = if p.estimate < e * 1.1 {
                (p.interval * 2).min(conf.probe_interval_max)
            } else {
                conf.probe_interval
            };
        }
        p.estimate_at_probe = Some(p.estimate);
        p.next = now + p.interval;
        true
    }

    /// The minimum and desired send rates to ask str0m's estimator for, when they changed:
    /// sustain traffic up to the next candidate (so the estimate can grow into it), probe
    /// towards the top one. `desired` sticks while the top point's measured rate wanders
    /// within `desired_tolerance`: str0m starts allocation probes (at up to twice the
    /// estimate) on every raise of `desired` above the estimate, and a measured rate that
    /// ticks up every second would probe a narrow path into loss over and over.
    ///
    /// The minimum is also kept under `pad_share` of the video's part of the estimate
    /// (`video_bps`): str0m pads the video stream up to the minimum (capped by the whole
    /// estimate, audio not counted), so padding up to the next layer on a path that the
    /// estimate already fills would overflow its queue and cost media packets.
    ///
    /// `ladder` is every point of the layout (`Relay::ladder`), not only those available now:
    /// while an upper layer is broken upstream the browser's traffic is kept up to the next
    /// point of the whole ladder, or its estimate would sink to what the lower layers send and
    /// take many seconds to climb back once the layer is whole again.
    pub fn bwe_targets(
        &mut self,
        now: Instant,
        ladder: &[Candidate],
        video_bps: f64,
    ) -> Option<(f64, f64)> {
        let top = ladder.last()?;
        let cur = self.current?;
        let cur_rate = ladder.iter().find(|c| c.choice == cur)?.rate_bps;
        let next = ladder.iter().find(|c| c.rate_bps > cur_rate).unwrap_or(top);
        let mut desired = self.wire_rate(top) * 1.1;
        let min = self
            .wire_rate(next)
            .min(desired)
            .min(video_bps * self.conf.pad_share);
        let probe = self.probe_due(now, cur == top.choice);
        if let Some((m, d)) = self.sent_targets {
            let raised = self.probe.is_some_and(|p| p.raised);
            let base = if raised { d / PROBE_RAISE } else { d };
            if (desired / base - 1.0).abs() <= self.conf.desired_tolerance {
                desired = base;
            }
            if probe {
                // A raise starts the probe; if `desired` is raised already, this update
                // lowers it and the next one raises it again.
                if raised {
                    if let Some(p) = &mut self.probe {
                        p.raised = false;
                        p.next = now;
                        p.estimate_at_probe = None;
                    }
                } else {
                    desired *= PROBE_RAISE;
                    if let Some(p) = &mut self.probe {
                        p.raised = true;
                    }
                }
            } else if raised {
                desired *= PROBE_RAISE;
            }
            if (min / m - 1.0).abs() <= 0.05 && desired == d {
                return None;
            }
        }
        let min = min.min(desired);
        self.sent_targets = Some((min, desired));
        Some((min, desired))
    }
}

/// How much `desired` is raised to start a restore probe.
const PROBE_RAISE: f64 = 1.02;

#[cfg(test)]
mod tests;
