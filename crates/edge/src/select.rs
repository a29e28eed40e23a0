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
//! need a margin (`up_margin`), and after a spatial down-switch caused by the estimate a
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
    /// Spatial layers above 0 are not chosen at a lower frame rate than this.
    pub min_upper_fps: f64,
    /// After a spatial down-switch by the estimate, no spatial up-switch for this long.
    pub spatial_up_hold: Duration,
    /// Loss from which the virtual rate is the share of the estimate that gets through.
    pub loss_low: f32,
    /// A shortfall down to this share of the current point's wire rate, without loss, must
    /// last `down_hold` before a down-switch; a deeper one switches at once.
    pub deep_down: f64,
    /// How long a shallow shortfall must last.
    pub down_hold: Duration,
}

impl Default for SelectConfig {
    fn default() -> Self {
        SelectConfig {
            overhead: 1.08,
            up_margin: 0.85,
            min_upper_fps: 14.0,
            spatial_up_hold: Duration::from_secs(4),
            loss_low: 0.02,
            deep_down: 0.6,
            down_hold: Duration::from_millis(1500),
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
    /// Since when the virtual rate has been below the current point (without a switch).
    short_since: Option<Instant>,
}

impl Selector {
    pub fn new(conf: SelectConfig) -> Self {
        Selector {
            conf,
            current: None,
            last_spatial_down: None,
            short_since: None,
        }
    }

    pub fn current(&self) -> Option<Choice> {
        self.current
    }

    /// The rate the estimate must carry for candidate `c` (wire bits).
    pub fn wire_rate(&self, c: &Candidate) -> f64 {
        c.rate_bps * self.conf.overhead
    }

    /// The virtual rate: the estimate adjusted by the loss the browser reports.
    pub fn virtual_rate(&self, estimate_bps: f64, loss: f32) -> f64 {
        if loss < self.conf.loss_low {
            estimate_bps
        } else {
            estimate_bps * (1.0 - f64::from(loss.min(0.5)))
        }
    }

    /// Re-evaluates; returns the new target if it changed.
    pub fn update(
        &mut self,
        now: Instant,
        estimate_bps: f64,
        loss: f32,
        cands: &[Candidate],
    ) -> Option<(Choice, Reason)> {
        let first = cands.first()?;
        let v = self.virtual_rate(estimate_bps, loss);
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
            return Some((best_down, Reason::Up));
        };
        let cur_rate = cands.iter().find(|c| c.choice == cur);
        let Some(cur_c) = cur_rate else {
            // The current point is no longer offered (the edge lost layers upstream).
            self.current = Some(best_down);
            return Some((best_down, Reason::Available));
        };
        if fits(cur_c, 1.0) || best_down == cur {
            self.short_since = None;
        } else {
            let since = *self.short_since.get_or_insert(now);
            let deep =
                loss >= self.conf.loss_low || v < self.wire_rate(cur_c) * self.conf.deep_down;
            if !deep && now < since + self.conf.down_hold {
                return None;
            }
            self.short_since = None;
            if best_down.spatial < cur.spatial {
                self.last_spatial_down = Some(now);
            }
            self.current = Some(best_down);
            return Some((best_down, Reason::Down));
        }
        let hold = self
            .last_spatial_down
            .is_some_and(|t| now < t + self.conf.spatial_up_hold);
        let up = cands
            .iter()
            .rev()
            .filter(|c| c.rate_bps > cur_c.rate_bps)
            .filter(|c| !(hold && c.choice.spatial > cur.spatial))
            .find(|c| fits(c, self.conf.up_margin))
            .map(|c| c.choice);
        match up {
            Some(u) if u != cur => {
                self.current = Some(u);
                Some((u, Reason::Up))
            }
            _ => None,
        }
    }

    /// The minimum and desired send rates to ask str0m's estimator for: sustain traffic up to
    /// the next candidate (so the estimate can grow into it), probe towards the top one.
    pub fn bwe_targets(&self, cands: &[Candidate]) -> Option<(f64, f64)> {
        let top = cands.last()?;
        let cur = self.current?;
        let i = cands.iter().position(|c| c.choice == cur)?;
        let next = cands.get(i + 1).unwrap_or(top);
        Some((self.wire_rate(next), self.wire_rate(top) * 1.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::VideoLayout;

    fn layout() -> VideoLayout {
        VideoLayout::from_session("t", &crate::testutil::l3t3_session()).unwrap()
    }

    fn cands() -> Vec<Candidate> {
        let l = layout();
        candidates(&l, 2, &SelectConfig::default(), |s, t| {
            l.rate_of(s, t) as f64
        })
    }

    #[test]
    fn candidates_skip_slow_upper_layers() {
        let c: Vec<(u8, u8)> = cands()
            .iter()
            .map(|c| (c.choice.spatial, c.choice.temporal))
            .collect();
        // 7.5 fps is below the 14 fps floor for 360p and 720p.
        assert_eq!(
            c,
            vec![(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 1), (2, 2)]
        );
    }

    #[test]
    fn estimate_maps_to_layers() {
        let now = Instant::now();
        let c = cands();
        for (est, want) in [
            (4_000_000.0, (2, 2)),
            (1_500_000.0, (2, 1)),
            (650_000.0, (1, 2)),
            (300_000.0, (0, 2)),
            (50_000.0, (0, 0)),
        ] {
            let mut s = Selector::new(SelectConfig::default());
            let (ch, _) = s.update(now, est, 0.0, &c).unwrap();
            assert_eq!((ch.spatial, ch.temporal), want, "estimate {est}");
        }
    }

    #[test]
    fn down_at_once_up_after_the_hold() {
        let t0 = Instant::now();
        let c = cands();
        let mut s = Selector::new(SelectConfig::default());
        s.update(t0, 4e6, 0.0, &c);
        assert_eq!(s.current().unwrap().spatial, 2);
        // 0.8 Mbit/s is a deep shortfall under 720p's 1.65 Mbit/s on the wire: at once.
        let (ch, r) = s
            .update(t0 + Duration::from_secs(1), 0.8e6, 0.0, &c)
            .unwrap();
        assert_eq!((ch.spatial, r), (1, Reason::Down));
        // The estimate recovers at once, but 720p waits for the hold.
        assert_eq!(s.update(t0 + Duration::from_secs(2), 4e6, 0.0, &c), None);
        let (ch, r) = s.update(t0 + Duration::from_secs(6), 4e6, 0.0, &c).unwrap();
        assert_eq!(
            (ch, r),
            (
                Choice {
                    spatial: 2,
                    temporal: 2
                },
                Reason::Up
            )
        );
    }

    fn at(spatial: u8, temporal: u8) -> Choice {
        Choice { spatial, temporal }
    }

    #[test]
    fn a_short_shallow_dip_keeps_the_layers() {
        // The clean-path wander of str0m's estimate: 1.65 Mbit/s of 720p on the wire, the
        // estimate dips to 1.4 Mbit/s for a second and comes back.
        let t0 = Instant::now();
        let c = cands();
        let mut s = Selector::new(SelectConfig::default());
        s.update(t0, 2.9e6, 0.0, &c);
        assert_eq!(s.current(), Some(at(2, 2)));
        for ms in [0, 300, 600, 1000] {
            let now = t0 + Duration::from_secs(1) + Duration::from_millis(ms);
            assert_eq!(s.update(now, 1.4e6, 0.0, &c), None, "dip at +{ms} ms");
        }
        assert_eq!(
            s.update(t0 + Duration::from_millis(2100), 2.9e6, 0.0, &c),
            None
        );
        // A second dip starts its own hold.
        assert_eq!(
            s.update(t0 + Duration::from_millis(2200), 1.4e6, 0.0, &c),
            None
        );
        assert_eq!(
            s.update(t0 + Duration::from_millis(3000), 1.4e6, 0.0, &c),
            None
        );
        assert_eq!(s.current(), Some(at(2, 2)));
    }

    #[test]
    fn a_lasting_shortfall_or_loss_moves_down() {
        let t0 = Instant::now();
        let c = cands();
        let mut s = Selector::new(SelectConfig::default());
        s.update(t0, 2.9e6, 0.0, &c);
        assert_eq!(s.update(t0 + Duration::from_secs(1), 1.4e6, 0.0, &c), None);
        let hold = SelectConfig::default().down_hold;
        let (ch, r) = s
            .update(t0 + Duration::from_secs(1) + hold, 1.4e6, 0.0, &c)
            .unwrap();
        assert_eq!((ch, r), (at(2, 1), Reason::Down));
        // The same shallow shortfall with loss reported: the path is full, down at once.
        let mut s = Selector::new(SelectConfig::default());
        s.update(t0, 2.9e6, 0.0, &c);
        let (ch, r) = s
            .update(t0 + Duration::from_secs(1), 1.4e6, 0.03, &c)
            .unwrap();
        assert_eq!((ch, r), (at(2, 1), Reason::Down));
    }

    #[test]
    fn loss_cuts_the_virtual_rate() {
        let s = Selector::new(SelectConfig::default());
        assert!((s.virtual_rate(1e6, 0.2) - 0.8e6).abs() < 1.0);
        assert_eq!(s.virtual_rate(1e6, 0.01), 1e6);
        assert!((s.virtual_rate(1e6, 0.9) - 0.5e6).abs() < 1.0);
    }
}
