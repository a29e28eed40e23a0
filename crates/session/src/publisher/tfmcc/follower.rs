//! The encoder target a TFMCC session follows (sans-IO): hysteresis between the TFMCC rate and
//! the encoder's total bitrate target.

use super::HEADER_LEN;
use proto::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Hysteresis between the TFMCC rate and the encoder's total target (sans-IO).
///
/// The target is the time-weighted mean of `min(X, ceiling)` over the last `window`, times
/// the media share of a packet ([`media_share`]) times `headroom`, capped at the configured
/// ladder's total. It changes only when the new value differs from the one in force by
/// more than `deadband` (relative), and at most once per `min_interval`: every change makes
/// libvpx re-plan its rate buffer, and the spec (tfrc-tfmcc-pcc.md §7.3 E17) allows at most
/// one switch per 2 s. The first call always sets a target (from the rate it is given).
///
/// Why a mean and not X at the switch instant: with a TCP flow on the path, X swings by
/// ±40 % within a few seconds (a loss event cuts it, the time-accrued increase brings it
/// back). A switch can only happen every 2 s, and a target taken from X at that instant
/// samples the swing: the session-3 E17 run switched to wire rates of 770, 320, 771, 414
/// and 730 kbit/s at 2-s steps while X averaged 590, and only the fifth switch (9.3 s after
/// TCP started) landed within ±25 % of it. What the encoder must match is what the pacer
/// will send over the next seconds, which the recent mean predicts and one sample does not.
/// A step in X of more than the dead band still reaches the target within about
/// `min_interval + window / 4` (the first switch fires once the mean has moved by
/// `deadband`, the next carries mostly the new level).
#[derive(Clone, Debug)]
pub struct TargetFollower {
    pub min_interval: Duration,
    pub deadband: f64,
    pub headroom: f64,
    /// Span of the rate mean the target follows.
    pub window: Duration,
    /// Rate steps within `window` (and the one in force at its start): (since, bit/s).
    history: VecDeque<(Time, f64)>,
    /// Bytes of media per `packet_size` bytes on the wire.
    pub media_share: f64,
    /// Largest target, kbit/s (the configured ladder's total).
    pub max_kbps: u32,
    /// Smallest target, kbit/s.
    pub min_kbps: u32,
    current: Option<u32>,
    last_change: Option<Time>,
    switches: u64,
}

/// Default [`TargetFollower::headroom`]: the encoder aims 10 % under the media share of the
/// rate, so its overshoot (libvpx CBR allows +50 % per frame, a few % on average) does not
/// build a send queue.
pub const TARGET_HEADROOM: f64 = 0.9;
/// Default [`TargetFollower::deadband`].
pub const TARGET_DEADBAND: f64 = 0.1;
/// Default [`TargetFollower::min_interval`] (E17: at most one switch per 2 s).
pub const TARGET_MIN_INTERVAL: Duration = Duration::from_secs(2);
/// Default [`TargetFollower::window`]: 1.5 switch intervals, so a swing of X with a period
/// up to about the window averages out while a step is still followed within ~2.75 s.
/// Chosen on replays of seven E17 runs' rate traces and of sine swings (docs/protocols/
/// tfmcc.md, "Live video"): 2 s left the runs' worst reaction at 7.8 s, 3 s at 4.5 s.
pub const TARGET_WINDOW: Duration = Duration::from_secs(3);
/// Rate updates closer together than this share one history entry (the sender calls
/// [`TargetFollower::update`] per packet; this bounds the history to `window / 5 ms`).
const TARGET_HISTORY_STEP: Duration = Duration::from_millis(5);

/// The media share of a `packet_size`-byte TFMCC data packet: what is left after the RTP
/// header with both extensions ([`HEADER_LEN`]) and an 8-byte VP9 payload descriptor
/// (picture ID, layer indices; larger only on key pictures with their SS).
pub fn media_share(packet_size: u16) -> f64 {
    let s = f64::from(packet_size.max(1));
    ((s - HEADER_LEN as f64 - 8.0) / s).clamp(0.05, 1.0)
}

impl TargetFollower {
    pub fn new(packet_size: u16, max_kbps: u32) -> TargetFollower {
        TargetFollower {
            min_interval: TARGET_MIN_INTERVAL,
            deadband: TARGET_DEADBAND,
            headroom: TARGET_HEADROOM,
            window: TARGET_WINDOW,
            history: VecDeque::new(),
            media_share: media_share(packet_size),
            max_kbps: max_kbps.max(1),
            // libvpx cannot code 360p L3T3 much below this anyway (key pictures).
            min_kbps: (max_kbps / 20).max(10),
            current: None,
            last_change: None,
            switches: 0,
        }
    }

    /// The target (kbit/s) the rate `rate_bps` asks for, before hysteresis.
    pub fn desired_kbps(&self, rate_bps: f64) -> u32 {
        let r = if rate_bps.is_finite() { rate_bps } else { 0.0 };
        let k = (r * self.media_share * self.headroom / 1e3).round();
        (k.clamp(0.0, u32::MAX as f64) as u32)
            .clamp(self.min_kbps.min(self.max_kbps), self.max_kbps)
    }

    /// Records that the rate is `rate_bps` from `now` on, forgetting what the window no
    /// longer covers (the newest step at or before the window's start is kept: it says what
    /// the rate was there).
    fn record(&mut self, now: Time, rate_bps: f64) {
        let r = if rate_bps.is_finite() {
            rate_bps.max(0.0)
        } else {
            0.0
        };
        match self.history.back_mut() {
            Some(last) if now.saturating_since(last.0) < TARGET_HISTORY_STEP => last.1 = r,
            _ => self.history.push_back((now, r)),
        }
        let start = Time(now.0.saturating_sub(self.window.as_nanos() as u64));
        while self.history.len() >= 2 && self.history[1].0 <= start {
            self.history.pop_front();
        }
    }

    /// Time-weighted mean of the rate over the last `window` (or over what is recorded, if
    /// less); `None` while the recorded span is empty.
    pub fn mean_rate(&self, now: Time) -> Option<f64> {
        let start = Time(now.0.saturating_sub(self.window.as_nanos() as u64));
        let (mut area, mut span) = (0.0, 0.0);
        for (i, &(since, r)) in self.history.iter().enumerate() {
            let until = self.history.get(i + 1).map_or(now, |n| n.0);
            let from = since.max(start);
            if until > from {
                let d = until.saturating_since(from).as_secs_f64();
                area += r * d;
                span += d;
            }
        }
        (span > 0.0).then(|| area / span)
    }

    /// Feeds the current rate; returns the new target (kbit/s) when it switches.
    pub fn update(&mut self, now: Time, rate_bps: f64) -> Option<u32> {
        self.record(now, rate_bps);
        let rate = match self.current {
            // The first target: the mean has no span yet.
            None => rate_bps,
            Some(_) => self.mean_rate(now).unwrap_or(rate_bps),
        };
        let want = self.desired_kbps(rate);
        let switch = match (self.current, self.last_change) {
            (Some(cur), Some(last)) => {
                now.saturating_since(last) >= self.min_interval
                    && (f64::from(want) - f64::from(cur)).abs() > self.deadband * f64::from(cur)
            }
            _ => true,
        };
        if !switch {
            return None;
        }
        self.current = Some(want);
        self.last_change = Some(now);
        self.switches += 1;
        Some(want)
    }

    /// The target in force, kbit/s.
    pub fn current(&self) -> Option<u32> {
        self.current
    }

    /// Switches made (the first setting included).
    pub fn switches(&self) -> u64 {
        self.switches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_follower_switches_at_most_every_2_s_and_outside_the_deadband() {
        let mut f = TargetFollower::new(1200, 1550);
        // 1 Mbit/s on the wire: 1128 of 1200 bytes are media, 90 % of that is the target.
        assert_eq!(f.desired_kbps(1e6), 846);
        // Capped at the ladder's total and floored at 5 % of it.
        assert_eq!(f.desired_kbps(10e6), 1550);
        assert_eq!(f.desired_kbps(1e3), 77);
        assert_eq!(f.desired_kbps(f64::NAN), 77);
        let t = |ms: u64| Time::from_millis(ms);
        // The first call sets the target from the rate it is given.
        assert_eq!(f.update(t(0), 1e6), Some(846));
        // Within 2 s nothing moves, however far the rate goes.
        assert_eq!(f.update(t(100), 0.5e6), None);
        assert_eq!(f.update(t(1999), 0.5e6), None);
        // After 2 s the target carries the mean rate over what the window holds so far
        // (2 s of its 3): 0.1 s at 1 Mbit/s and 1.9 s at 0.5 Mbit/s = 525 kbit/s.
        let m = f.mean_rate(t(2000)).unwrap();
        assert!((m - 0.525e6).abs() < 1.0, "{m}");
        assert_eq!(f.update(t(2000), 0.5e6), Some(444));
        // A mean within 10 % of the target in force (0.5 Mbit/s asks for 423, 0.53 for 448)
        // never switches, however long.
        for ms in (2010..9000).step_by(10) {
            let rate = if ms < 4000 { 0.5e6 } else { 0.53e6 };
            assert_eq!(f.update(t(ms), rate), None, "at {ms} ms");
        }
        assert_eq!(f.current(), Some(444));
        // 0.6 Mbit/s (508) from 9 s: the mean leaves the band (> 488) once about two thirds
        // of the 3-s window are at the new rate (2.04 s); the 4 % left is inside the dead
        // band.
        let mut at = Vec::new();
        for ms in (9000..14_000).step_by(10) {
            if let Some(k) = f.update(t(ms), 0.6e6) {
                at.push((ms, k));
            }
        }
        assert_eq!(at, vec![(11_040, 489)]);
        assert_eq!(f.switches(), 3);
        // Driven every millisecond by a rate that swings, the switches stay 2 s apart; a
        // swing the mean averages out makes one switch (to the mean) and no more.
        for period_ms in [14u64, 4000] {
            let mut g = TargetFollower::new(1200, 1550);
            let mut last: Option<u64> = None;
            for ms in 0..20_000u64 {
                let rate = if (ms / (period_ms / 2)) % 2 == 0 {
                    1e6
                } else {
                    0.3e6
                };
                if g.update(t(ms), rate).is_some() {
                    if let Some(l) = last {
                        assert!(ms - l >= 2000, "switches at {l} and {ms} ms");
                    }
                    last = Some(ms);
                }
            }
            // 14 ms: the first setting, then one switch to the mean (650 kbit/s).
            // 4 s: each 3-s window holds a different mix of the two rates.
            if period_ms == 14 {
                assert_eq!(g.switches(), 2);
                let c = f64::from(g.current().unwrap());
                let want = f64::from(g.desired_kbps(0.65e6));
                assert!((c - want).abs() <= 0.01 * want, "{c} vs {want}");
            } else {
                assert!(g.switches() >= 5, "{} switches in 20 s", g.switches());
            }
        }
        // The history stays bounded when the rate changes on every packet.
        let mut h = TargetFollower::new(1200, 1550);
        for us in (0..10_000_000u64).step_by(100) {
            h.update(Time::from_micros(us), 1e6 + (us % 7) as f64);
        }
        assert!(h.history.len() <= 602, "{}", h.history.len());
    }

    /// Replays a rate trace (ms from the TCP start, kbit/s; `interpolate`: linear between
    /// the points, else each holds until the next) through a follower updated every 10 ms,
    /// as the sender's loop does, and returns E17's reaction: the time from the TCP start to
    /// the first switch whose target, as the wire rate it serves, lies within ±25 % of
    /// `with_tcp_kbps` (the player test's measure, player/tests/netns_tfmcc.rs).
    fn e17_reaction(trace: &[(i64, f64)], interpolate: bool, with_tcp_kbps: f64) -> Option<f64> {
        let rate_at = |ms: i64| -> f64 {
            let i = trace.partition_point(|p| p.0 <= ms);
            if i == 0 {
                return trace[0].1;
            }
            let (a, x) = trace[i - 1];
            match trace.get(i) {
                Some(&(b, y)) if interpolate => x + (y - x) * (ms - a) as f64 / (b - a) as f64,
                _ => x,
            }
        };
        let per_wire = media_share(1200) * TARGET_HEADROOM;
        let mut f = TargetFollower::new(1200, 1550);
        let start = trace[0].0;
        let t = |ms: i64| Time::from_millis((ms - start) as u64);
        let mut reaction = None;
        for ms in (start..=trace[trace.len() - 1].0).step_by(10) {
            if let Some(k) = f.update(t(ms), rate_at(ms) * 1e3) {
                let wire = f64::from(k) / per_wire;
                if ms >= 0
                    && reaction.is_none()
                    && (wire - with_tcp_kbps).abs() <= 0.25 * with_tcp_kbps
                {
                    reaction = Some(ms as f64 / 1e3);
                }
            }
        }
        reaction
    }

    #[test]
    fn target_follower_reaches_the_e17_band_within_5_s_on_recorded_traces() {
        // The failing E17 run (session 3, fresh clone, 2026-11-22: "followed within 9.3 s,
        // X itself 1.3 s"): min(X, ceiling) at each instant the follower switched, from the
        // server's switch log, ms from the TCP start. With TCP X swung between ~320 and
        // ~770 kbit/s (mean 590 over 10-30 s), and a target taken from X at the switch
        // instant hit 775, 330, 760, 424 (all outside 443-737) before 720 at 9.3 s. The
        // first point is a switch (the grid the old follower kept).
        let failing = [
            (-9363, 1052.0),
            (-7356, 1179.0),
            (-5355, 1014.0),
            (-3090, 898.0),
            (-697, 1006.0),
            (1309, 770.0),
            (3310, 320.0),
            (5316, 771.0),
            (7322, 414.0),
            (9332, 730.0),
            (11338, 554.0),
            (13716, 494.0),
            (16162, 434.0),
            (18163, 583.0),
            (20404, 657.0),
            (22405, 748.0),
            (24419, 529.0),
            (26423, 587.0),
            (28425, 646.0),
        ];
        let r = e17_reaction(&failing, true, 589.9);
        assert!(r.is_some_and(|r| r <= 5.0), "reaction {r:?} s");
        // A passing run (this session, 2026-11-22 20:40 UTC): the rate the E17 test polled
        // every 250 ms, -4..12 s around the TCP start (mean 672 kbit/s over 10-30 s). X
        // fell over ~2.5 s; the mean must not make the target slower than the spec's 5 s.
        let passing = [
            (-382, 975.0),
            (-356, 890.0),
            (-331, 870.0),
            (-305, 943.0),
            (-278, 1051.0),
            (-253, 1123.0),
            (-228, 1228.0),
            (-202, 929.0),
            (-177, 929.0),
            (-152, 976.0),
            (-127, 1026.0),
            (-102, 905.0),
            (-76, 954.0),
            (-50, 1049.0),
            (-25, 958.0),
            (0, 962.0),
            (26, 976.0),
            (51, 956.0),
            (77, 870.0),
            (103, 882.0),
            (128, 809.0),
            (154, 808.0),
            (179, 839.0),
            (204, 657.0),
            (229, 557.0),
            (254, 679.0),
            (279, 735.0),
            (304, 725.0),
            (329, 695.0),
            (354, 649.0),
            (380, 675.0),
            (405, 579.0),
            (430, 616.0),
            (455, 596.0),
            (481, 638.0),
            (507, 599.0),
            (533, 560.0),
            (558, 586.0),
            (584, 681.0),
            (609, 589.0),
            (634, 650.0),
            (659, 559.0),
            (684, 575.0),
            (709, 509.0),
            (734, 522.0),
            (760, 515.0),
            (787, 579.0),
            (812, 666.0),
            (837, 779.0),
            (863, 842.0),
            (888, 672.0),
            (913, 788.0),
            (938, 664.0),
            (964, 624.0),
            (989, 594.0),
            (1015, 655.0),
            (1040, 626.0),
            (1065, 792.0),
            (1090, 762.0),
            (1116, 724.0),
            (1142, 678.0),
            (1167, 579.0),
            (1193, 745.0),
        ]
        .map(|(cs, k): (i64, f64)| (cs * 10, k));
        let r = e17_reaction(&passing, false, 672.0);
        assert!(r.is_some_and(|r| r <= 5.0), "reaction {r:?} s");
        // An undershoot (this session, 21:02 UTC, failed at 7.6 s with a 2-s window): X fell
        // from 1199 to 305 kbit/s 1.4 s after the TCP start and climbed back at ~20 kbit/s
        // per second (mean 530 over 10-30 s, band 398-663 entered by X itself at 6 s).
        // Every 2-s mean after the drop lay under the band until 7.6 s; the 3-s mean still
        // holds some of the level before the drop.
        let undershoot = [
            (-387, 863.0),
            (-360, 896.0),
            (-334, 945.0),
            (-305, 977.0),
            (-278, 1026.0),
            (-250, 1076.0),
            (-222, 1109.0),
            (-193, 1160.0),
            (-167, 881.0),
            (-140, 775.0),
            (-111, 839.0),
            (-82, 901.0),
            (-54, 942.0),
            (-26, 1004.0),
            (0, 1055.0),
            (31, 1134.0),
            (58, 1199.0),
            (86, 1199.0),
            (113, 568.0),
            (143, 305.0),
            (171, 312.0),
            (198, 316.0),
            (226, 323.0),
            (255, 329.0),
            (282, 334.0),
            (312, 340.0),
            (340, 344.0),
            (368, 351.0),
            (394, 357.0),
            (420, 361.0),
            (447, 366.0),
            (472, 372.0),
            (500, 376.0),
            (525, 382.0),
            (550, 386.0),
            (575, 392.0),
            (600, 397.0),
            (627, 401.0),
            (653, 408.0),
            (679, 412.0),
            (705, 416.0),
            (730, 423.0),
            (757, 427.0),
            (782, 433.0),
            (809, 437.0),
            (835, 441.0),
            (860, 448.0),
            (887, 452.0),
            (912, 458.0),
            (937, 462.0),
            (963, 469.0),
            (991, 473.0),
            (1018, 479.0),
            (1045, 483.0),
            (1070, 488.0),
            (1096, 496.0),
            (1121, 501.0),
            (1146, 507.0),
            (1173, 514.0),
            (1199, 520.0),
        ]
        .map(|(cs, k): (i64, f64)| (cs * 10, k));
        let r = e17_reaction(&undershoot, false, 530.1);
        assert!(r.is_some_and(|r| r <= 5.0), "reaction {r:?} s");
        // A clean step 1000 -> 600 kbit/s: the 3-s mean crosses the dead band 0.75 s in,
        // and the next allowed switch (2 s later) carries mostly the new level.
        let step = [(-10_000, 1000.0), (0, 600.0), (20_000, 600.0)];
        let r = e17_reaction(&step, false, 600.0).unwrap();
        assert!((2.7..=2.8).contains(&r), "step reaction {r} s");
    }
}
