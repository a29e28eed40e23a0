//! The video playout buffer: display times of decoded pictures from their RTP timestamps,
//! sized by the jitter it measures, within a latency bound.
//!
//! A picture's *lateness* is its decode time minus where the RTP clock, anchored at the
//! first decoded picture, puts it. The fastest picture of the last window (default [`WINDOW_NS`]) is the
//! path's floor; the buffer (the offset added to the anchored clock) is the `quantile` of the
//! window's lateness, at most `max_jitter` above that floor, so a picture as late as the
//! quantile is still shown on its slot, and what is later than the bound is shown at once
//! (counted as late) instead of holding every picture back by it. The offset rises at once
//! (a rising delay would otherwise make every picture late) and falls by at most
//! [`DRAIN`] of the elapsed time (the shown rate rises by at most that share while the
//! buffer drains, so a falling delay is a slightly faster picture, not a jump). Display
//! times never go backwards. A fixed `extra` delay can be added (`--playout-delay-ms`).
//!
//! Why adaptive: the fixed 800-ms delay it replaces was sized for the worst key-picture
//! queueing seen, and every picture paid it on every path. Why the defaults (the whole
//! lateness of the last 8 s, within 1 s): the pictures that come late are the key pictures and
//! the large frames around them, periodically; a buffer that forgets them between two of
//! them (the 0.95 quantile of 2 s, within 150 ms) froze at each: measured in
//! docs/player.md "Adaptive playout buffer".

use std::collections::VecDeque;

/// Default span of recent pictures whose lateness sizes the buffer: long enough to hold
/// several key pictures (2 s apart by default), whose frames wait longest at the sender.
pub const WINDOW_NS: u64 = 8_000_000_000;
/// Default quantile of the window's lateness the buffer absorbs: all of it (the key pictures
/// are one picture in 30; any lower quantile leaves each of them late, a freeze every 2 s).
pub const QUANTILE: f64 = 1.0;
/// Default bound of the buffer above the fastest recent picture, ns.
pub const MAX_JITTER_NS: u64 = 1_000_000_000;
/// Default quantile of the top path's lateness the buffer absorbs when a lower path stands
/// in for late top frames (`crate::lower`): the share of pictures shown at the top layer at
/// least. Why 0.85 rather than 0.95: the top frames that come late are a key picture's or a
/// scene cut's and the pictures decoded behind them, about one in ten at 2-s keys; at 0.95
/// the buffer held them on every picture. Quality suite, ERA (docs/player.md "Not done yet"):
/// clean path p50 / p95 185 / 213 ms against 210 / 257, 5.6 % of the pictures from the layer
/// below against 4.0 %, -0.1 dB.
pub const TOP_QUANTILE: f64 = 0.85;
/// Default span of recent pictures whose lateness sizes the buffer on a path whose queueing
/// delay swings ([`SWING_NS`]): long enough to hold the last peaks of a TCP flow's sawtooth in
/// the same queue (12-26 s apart behind 4 Mbit/s shared with CUBIC in the quality suite, where
/// 8 s forgot the last peak before the next and each new peak was a freeze).
pub const LONG_WINDOW_NS: u64 = 40_000_000_000;
/// The path's queueing delay swings when the fastest picture of each second, over the long
/// window, spans more than this: the sender's key pictures do not move it (the other pictures
/// of their second are fast), a queue that fills and drains does. Quality suite at c3aaa18
/// (15 runs per case), span over 40 s: clean, middle and 20-ms-jitter paths at most 47 ms,
/// 1 % and 5 % loss up to 78, behind 4 Mbit/s shared with CUBIC 65-188.
pub const SWING_NS: i64 = 60_000_000;
/// Share of the elapsed time by which the buffer may shrink.
pub const DRAIN: f64 = 0.1;

/// See the module documentation.
pub struct PlayoutClock {
    /// (local ns, RTP timestamp) of the anchor picture.
    anchor: Option<(u64, u32)>,
    extra_ns: u64,
    max_jitter_ns: i64,
    quantile: f64,
    window_ns: u64,
    /// The window when the path's delay swings (0: never longer than `window_ns`).
    long_window_ns: u64,
    /// (decode time, lateness) of the pictures of the last `window_ns` (or `long_window_ns`,
    /// the longer), oldest first.
    lateness: VecDeque<(u64, i64)>,
    /// The fastest picture's lateness of each second (unix-less: `decode ns / 1 s`) over the
    /// longer window, oldest first: the path's queueing delay, kept apart from `lateness` so
    /// that a lower path starting ([`PlayoutClock::lower_path_starts`]) does not forget a
    /// swinging queue's last peak.
    floors: VecDeque<(u64, i64)>,
    /// The same of the top path's pictures, when a lower path decodes them first
    /// ([`PlayoutClock::top_decoded`]), and the quantile of them the buffer absorbs.
    top: VecDeque<(u64, i64)>,
    top_quantile: f64,
    /// The buffer: offset over the anchored clock, ns.
    offset: Option<i64>,
    /// The picture whose lateness raised the offset in `observe` since the last placement:
    /// it is late (the buffer it came to was shorter).
    rose: Option<u32>,
    last_now: u64,
    pub last_due: u64,
    /// The last placed picture's display time on this buffer alone, before display times
    /// are kept from going backwards (`last_due` may be another clock's: the audio's).
    pub last_slot: u64,
}

impl PlayoutClock {
    pub fn new(extra_ns: u64, max_jitter_ns: u64, quantile: f64, window_ns: u64) -> Self {
        PlayoutClock {
            anchor: None,
            extra_ns,
            max_jitter_ns: max_jitter_ns.min(i64::MAX as u64) as i64,
            quantile: quantile.clamp(0.0, 1.0),
            window_ns,
            long_window_ns: LONG_WINDOW_NS,
            lateness: VecDeque::new(),
            floors: VecDeque::new(),
            top: VecDeque::new(),
            top_quantile: TOP_QUANTILE,
            offset: None,
            rose: None,
            last_now: 0,
            last_due: 0,
            last_slot: 0,
        }
    }

    /// The quantile of the top path's lateness the buffer absorbs (see
    /// [`PlayoutClock::top_decoded`]).
    pub fn with_top_quantile(mut self, q: f64) -> Self {
        self.top_quantile = q.clamp(0.0, 1.0);
        self
    }

    /// The window a swinging path's buffer is sized by (0 keeps `window_ns` always).
    pub fn with_long_window(mut self, ns: u64) -> Self {
        self.long_window_ns = ns;
        self
    }

    /// How long the lateness taken in is kept: the longer of the two windows.
    fn kept_ns(&self) -> u64 {
        self.window_ns.max(self.long_window_ns)
    }

    /// Whether the fastest picture of each second has spanned more than [`SWING_NS`] over
    /// the kept seconds (a queue shared with a flow that fills it), and the highest of them:
    /// the queue's last peak, which a swinging path's buffer holds.
    fn swing(&self) -> Option<i64> {
        let hi = self.floors.iter().map(|f| f.1).max()?;
        let lo = self.floors.iter().map(|f| f.1).min()?;
        (hi - lo > SWING_NS).then_some(hi)
    }

    /// The lateness of the pictures that size the buffer now, sorted: those of the last
    /// `window_ns`, or of the last `long_window_ns` while the path swings
    /// ([`PlayoutClock::swing`]).
    fn sized_by(&self) -> Vec<i64> {
        let Some(&(newest, newest_l)) = self.lateness.back() else {
            return Vec::new();
        };
        let now = newest.max(self.last_now);
        let span = if self.swing().is_some() {
            self.kept_ns()
        } else {
            self.window_ns
        };
        let mut v: Vec<i64> = self
            .lateness
            .iter()
            .filter(|x| x.0 + span >= now)
            .map(|x| x.1)
            .collect();
        if v.is_empty() {
            v.push(newest_l);
        }
        v.sort_unstable();
        v
    }

    /// Takes a picture's lateness into the per-second floors.
    fn floor_in(&mut self, now_ns: u64, lateness: i64) {
        let sec = now_ns / 1_000_000_000;
        match self.floors.back_mut() {
            Some(f) if f.0 == sec => f.1 = f.1.min(lateness),
            _ => self.floors.push_back((sec, lateness)),
        }
        let kept_s = self.kept_ns().div_ceil(1_000_000_000);
        while self.floors.front().is_some_and(|f| f.0 + kept_s < sec) && self.floors.len() > 1 {
            self.floors.pop_front();
        }
    }

    /// The top path decoded the picture with RTP timestamp `ts` at `now_ns`, while a lower
    /// path's lateness is what [`PlayoutClock::observe`] takes in. The buffer also holds the
    /// `top_quantile` of these: sized by the lower path alone, every picture whose top frame
    /// comes a little after the lower ones would be shown from the layer below.
    pub fn top_decoded(&mut self, ts: u32, now_ns: u64) {
        let anchor = *self.anchor.get_or_insert((now_ns, ts));
        self.top
            .push_back((now_ns, now_ns as i64 - nominal(anchor, ts)));
        forget(&mut self.top, self.window_ns, now_ns, 0);
    }

    /// A lower path starts standing in for late top pictures: the lateness taken in so far
    /// was the top path's, when every picture had to be on time, so it moves to the top
    /// path's history and is held at `top_quantile` from now on. Kept where it was, the top
    /// frames that come late around a join (the new layers' switch points, a key picture
    /// and the re-syncs other viewers asked for, before the lower path has a picture) held
    /// the whole buffer at their lateness for the window's 8 s.
    pub fn lower_path_starts(&mut self) {
        let mut all: Vec<(u64, i64)> = self.top.drain(..).chain(self.lateness.drain(..)).collect();
        all.sort_by_key(|x| x.0);
        self.top = all.into();
    }

    /// The current buffer (offset above the fastest recent picture), ns: what the jitter
    /// costs in latency now.
    pub fn jitter_ns(&self) -> u64 {
        let floor = self.sized_by().first().copied().unwrap_or(0);
        self.offset.map_or(0, |o| (o - floor).max(0) as u64)
    }

    /// The two terms the buffer is the larger of, above the fastest recent picture, ns: the
    /// `quantile` of every decoded picture's lateness (the lower path's, when it stands in)
    /// and the `top_quantile` of the top path's (0 without a lower path). Which one sets the
    /// latency is what a change to either path must move.
    pub fn terms_ns(&self) -> (u64, u64) {
        let all = self.sized_by();
        let floor = all.first().copied().unwrap_or(0);
        let term = |v: &[i64], q: f64| {
            if v.is_empty() {
                0
            } else {
                (quantile(v, q) - floor).max(0) as u64
            }
        };
        let mut top: Vec<i64> = self.top.iter().map(|x| x.1).collect();
        top.sort_unstable();
        (term(&all, self.quantile), term(&top, self.top_quantile))
    }

    /// The display slot (ns) the buffer gives the picture with RTP timestamp `ts` now, without
    /// taking it in: `None` before the first picture anchored the clock.
    pub fn slot(&self, ts: u32) -> Option<u64> {
        let nominal = nominal(self.anchor?, ts);
        Some((nominal + self.extra_ns as i64 + self.offset.unwrap_or(0)).max(0) as u64)
    }

    /// Display time (ns, same clock as `now_ns`) of the picture with RTP timestamp `ts`
    /// (90 kHz) decoded at `now_ns`, and whether it was decoded after its time: its lateness
    /// taken in ([`PlayoutClock::observe`]), then placed ([`PlayoutClock::place`]).
    pub fn due(&mut self, ts: u32, now_ns: u64) -> (u64, bool) {
        self.observe(ts, now_ns);
        self.place(ts, now_ns)
    }

    /// Takes in the lateness of the picture with RTP timestamp `ts` decoded at `now_ns`
    /// without placing it (the lower path's pictures, which are shown only if the top path's
    /// version is not in by the slot).
    ///
    /// A picture later than the buffer raises it to its own lateness at once (within the
    /// bound), whatever the quantile: the pictures decoded behind it (the frames queued
    /// after a key picture's at the sender) then keep their spacing after it and the buffer
    /// drains from there, where a buffer that ignored it would show them all at once after
    /// the hold. With the default quantile (1.0) the window's worst already includes it, so
    /// this never acts.
    pub fn observe(&mut self, ts: u32, now_ns: u64) {
        let nominal = nominal(*self.anchor.get_or_insert((now_ns, ts)), ts);
        let own = now_ns as i64 - nominal;
        self.lateness.push_back((now_ns, own));
        self.floor_in(now_ns, own);
        let kept = self.kept_ns();
        forget(&mut self.lateness, kept, now_ns, 1);
        // At quantile 1 the window's worst includes this picture: nothing to raise, and no
        // second sort of the window per picture (`place` sorts it).
        if let Some(o) = self.offset.filter(|_| self.quantile < 1.0) {
            let v = self.sized_by();
            let rise = own.min(v[0].saturating_add(self.max_jitter_ns));
            // Later than the quantile takes in, and than the buffer now.
            if rise > quantile(&v, self.quantile) && rise > o {
                self.offset = Some(rise);
                self.rose = Some(ts);
            }
        }
    }

    /// Display time of the picture with RTP timestamp `ts`, ready at `now_ns`, from the
    /// lateness taken in so far, and whether it is past its slot. Display times never go
    /// backwards.
    pub fn place(&mut self, ts: u32, now_ns: u64) -> (u64, bool) {
        let nominal = nominal(*self.anchor.get_or_insert((now_ns, ts)), ts);
        let kept = self.kept_ns();
        forget(&mut self.lateness, kept, now_ns, 1);
        forget(&mut self.top, self.window_ns, now_ns, 0);
        let own = now_ns as i64 - nominal;
        let v = self.sized_by();
        let mut t: Vec<i64> = self.top.iter().map(|x| x.1).collect();
        t.sort_unstable();
        let q = match (v.is_empty(), t.is_empty()) {
            (true, true) => own,
            (false, true) => quantile(&v, self.quantile),
            (true, false) => quantile(&t, self.top_quantile),
            (false, false) => quantile(&v, self.quantile).max(quantile(&t, self.top_quantile)),
        };
        // A swinging queue's last peak is held whichever path's pictures size the buffer
        // now: after a lower path starts, the history that held it is the top path's, kept
        // 8 s at its quantile, and the next peak was a freeze (quality suite, CUBIC-shared
        // path, docs/player.md "Not done yet").
        let q = self.swing().map_or(q, |peak| q.max(peak));
        let floor = v.first().or(t.first()).copied().unwrap_or(own);
        let target = q.min(floor.saturating_add(self.max_jitter_ns));
        let elapsed = now_ns.saturating_sub(self.last_now) as f64;
        self.last_now = now_ns;
        // A rise from `observe` since the last placement drains from now on.
        let rose = self.rose.take();
        let elapsed = if rose.is_some() { 0.0 } else { elapsed };
        let offset = match self.offset {
            Some(o) if target < o => target.max(o - (elapsed * DRAIN) as i64),
            _ => target,
        };
        self.offset = Some(offset);
        let slot = (nominal + self.extra_ns as i64 + offset).max(0) as u64;
        self.last_slot = slot.max(now_ns);
        let due = self.last_slot.max(self.last_due);
        self.last_due = due;
        (due, slot < now_ns || rose == Some(ts))
    }
}

/// Drops the entries older than `window_ns` before `now_ns`, keeping at least `keep`.
fn forget(w: &mut VecDeque<(u64, i64)>, window_ns: u64, now_ns: u64, keep: usize) {
    while w.front().is_some_and(|x| x.0 + window_ns < now_ns) && w.len() > keep {
        w.pop_front();
    }
}

/// The `q` quantile (nearest rank) of sorted, non-empty `v`.
fn quantile(v: &[i64], q: f64) -> i64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Where the RTP clock anchored at `(local ns, RTP timestamp)` puts timestamp `ts` (90 kHz,
/// wrapping), local ns.
fn nominal((base_ns, base_ts): (u64, u32), ts: u32) -> i64 {
    base_ns as i64 + ts.wrapping_sub(base_ts) as i32 as i64 * 1_000_000_000 / 90_000
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// 15 fps, transit 40 ms plus a jitter uniform in 0..60 ms (a fixed pseudo-random
    /// sequence), pictures decoded in order: the buffer settles near the jitter's top, every
    /// picture after the first second is shown on its slot (none late), at a steady
    /// 66.7-ms spacing, and the latency stays within the floor plus the bound.
    #[test]
    fn jitter_is_absorbed_within_the_bound() {
        let mut c = PlayoutClock::new(0, 150 * MS, 0.95, 2_000 * MS);
        let mut x: u64 = 12345;
        let (mut prev_due, mut prev_now) = (0u64, 0u64);
        let mut late = 0;
        for i in 0..300u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let jitter = (x >> 33) % (60 * MS);
            let capture = 1_000 * MS + i * 66_666_667;
            let now = (capture + 40 * MS + jitter).max(prev_now);
            prev_now = now;
            let (due, l) = c.due((i * 6000) as u32, now);
            assert!(due >= now && due >= prev_due);
            if i >= 30 {
                late += l as u32;
                assert!(due - capture <= 40 * MS + 60 * MS + 150 * MS, "picture {i}");
                let gap = due - prev_due;
                assert!((50 * MS..=84 * MS).contains(&gap), "picture {i}: gap {gap}");
            }
            prev_due = due;
        }
        // The 0.95 quantile: about one picture in twenty is late.
        assert!(late <= 30, "{late} late of 270");
    }

    /// Two decoders (`crate::lower`): the lower path's pictures come 10 ms after their
    /// capture (their lateness is taken in); the top path's come 20 ms after, but `late_every`-th 300 ms
    /// after. The buffer is the top path's 0.85 quantile: the rare late top frames are left to
    /// the lower path (not waited for, as the largest lateness would), and when they are
    /// more than about one in seven the buffer holds them.
    #[test]
    fn the_buffer_holds_the_top_paths_quantile() {
        let buffer_and_terms = |late_every: u64| {
            let mut c = PlayoutClock::new(0, 1_000 * MS, 1.0, 8_000 * MS);
            let t0 = 1_000 * MS;
            let mut offset = 0.0;
            for i in 0..600u64 {
                let (ts, capture) = ((i * 3000) as u32, t0 + i * 33_333_333);
                c.observe(ts, capture + 10 * MS);
                let top = if i % late_every == 0 { 300 } else { 20 };
                c.top_decoded(ts, capture + top * MS);
                c.place(ts, capture + 10 * MS);
                // The buffer over the anchored clock (the first picture's lower decode).
                offset = c.slot(ts).unwrap() as f64 - (capture + 10 * MS) as f64;
            }
            let (all, top) = c.terms_ns();
            ((offset / 1e6).round() as u64, all / MS, top / MS)
        };
        let buffer = |late_every: u64| buffer_and_terms(late_every).0;
        // The terms: the lower path's lateness is the floor (0 above it); the top path's
        // quantile is its usual 10 ms above, or the late frames' 290 when they are held.
        assert_eq!(buffer_and_terms(10), (10, 0, 10));
        assert_eq!(buffer_and_terms(5), (290, 0, 290));
        // One in 10 late (24 late top frames of the 240 in 8 s): the buffer is 10 ms above
        // the lower path, for the usual top frame.
        assert_eq!(buffer(10), 10);
        // One in 5: they are held.
        assert_eq!(buffer(5), 290);
        // Without top-path pictures it is the lower path's lateness.
        let mut c = PlayoutClock::new(0, 1_000 * MS, 1.0, 8_000 * MS);
        c.due(0, 5 * MS);
        c.due(3000, 5 * MS + 33_333_333);
        assert_eq!(c.slot(3000), Some(5 * MS + 33_333_333));
        assert_eq!(c.jitter_ns(), 0);
    }

    /// Before a lower path stands in, every picture's lateness is held whole (two pictures
    /// 300 ms late around a join); once it stands in, that history is the top path's and is
    /// held at its quantile: the buffer drains to the lower path's 10 ms within a few seconds
    /// instead of holding 300 ms for the whole 8-s window.
    #[test]
    fn the_history_before_the_lower_path_is_the_top_paths() {
        let buffer_after = |starts: bool| {
            let mut c = PlayoutClock::new(0, 1_000 * MS, 1.0, 8_000 * MS);
            let t0 = 1_000 * MS;
            let pic = |i: u64| ((i * 3000) as u32, t0 + i * 33_333_333);
            let mut at = Vec::new();
            for i in 0..300u64 {
                let (ts, capture) = pic(i);
                if i < 60 {
                    // One path: the top pictures' lateness, two of them late.
                    let late = if i == 40 || i == 41 { 300 } else { 10 };
                    c.due(ts, capture + late * MS);
                    continue;
                }
                if i == 60 && starts {
                    c.lower_path_starts();
                }
                c.observe(ts, capture + 10 * MS);
                c.top_decoded(ts, capture + 20 * MS);
                c.place(ts, capture + 10 * MS);
                let offset = c.slot(ts).unwrap() as f64 - (capture + 10 * MS) as f64;
                at.push(((offset / 1e6).round() as i64, i));
            }
            // The buffer 4 s after the lower path started (picture 180).
            at.iter().find(|x| x.1 == 180).unwrap().0
        };
        // Without the move the late pair (at 1.33 s) is held until 9.3 s.
        assert_eq!(buffer_after(false), 290);
        // With it the buffer is back to the top path's usual 10 ms above the lower path.
        assert_eq!(buffer_after(true), 10);
    }

    /// A picture 500 ms late (a key picture queued at the sender) is shown when decoded; the
    /// buffer does not follow it beyond the bound, and the pictures after it are back on their
    /// slots once it has passed.
    #[test]
    fn a_late_picture_does_not_hold_the_rest_beyond_the_bound() {
        let mut c = PlayoutClock::new(0, 100 * MS, 0.95, 2_000 * MS);
        let mut prev_now = 0;
        let mut held = Vec::new();
        for i in 0..100u64 {
            let capture = 1_000 * MS + i * 100 * MS;
            let now = (capture + if i == 30 { 500 * MS } else { 10 * MS }).max(prev_now);
            prev_now = now;
            let (due, late) = c.due((i * 9000) as u32, now);
            if i == 30 {
                assert!(late);
                assert_eq!(due, now);
            }
            held.push((due - capture) / MS);
        }
        // Never more than floor (10 ms) + bound (100 ms) once the pictures decoded right
        // behind the late one (31..=34, shown when decoded) have passed.
        assert!(held[35..].iter().all(|&h| h <= 110), "{held:?}");
        assert!(held[..30].iter().all(|&h| h == 10), "{held:?}");
        // Once they are out of the window, the buffer drains back to the floor.
        assert_eq!(held[99], 10, "{held:?}");
    }

    /// `slot` gives the time `due` would give an on-time picture, without taking it in (the
    /// window and the offset do not move), and nothing before the clock is anchored.
    #[test]
    fn slot_is_due_without_taking_the_picture_in() {
        let mut c = PlayoutClock::new(0, 200 * MS, 1.0, 2_000 * MS);
        assert_eq!(c.slot(0), None);
        for i in 0..20u64 {
            c.due(
                (i * 3000) as u32,
                1_000 * MS + i * 33_333_333 + if i == 5 { 80 * MS } else { 0 },
            );
        }
        let ts = (25 * 3000) as u32;
        let s = c.slot(ts).unwrap();
        assert_eq!(c.slot(ts), Some(s));
        // Anchor 1000 ms, 25 pictures of 33.3 ms, plus the 80-ms offset of picture 5.
        assert_eq!(s / MS, 1_000 + 833 + 80);
        let (due, late) = c.due(ts, s - 10 * MS);
        assert_eq!((due, late), (s, false));
    }

    /// The buffer rises at once when the path's delay rises, and drains at most `DRAIN` of
    /// the elapsed time when it falls: display times never go backwards, no gap shrinks by
    /// more than that share.
    #[test]
    fn the_buffer_rises_at_once_and_drains_slowly() {
        let mut c = PlayoutClock::new(0, 200 * MS, 1.0, 2_000 * MS);
        let mut last = 0;
        let mut ds = Vec::new();
        for i in 0..120u64 {
            let capture = i * 100 * MS;
            let lat = match i {
                0..40 => 20 * MS,
                40..45 => 150 * MS,
                _ => 20 * MS,
            };
            let (due, _) = c.due((i * 9000) as u32, capture + lat);
            assert!(due >= last);
            if last > 0 {
                assert!(due - last >= 89 * MS, "picture {i}: gap {}", due - last);
            }
            last = due;
            ds.push((due - capture) / MS);
        }
        assert_eq!(ds[41], 150);
        // After the window has forgotten the slow pictures, the buffer drains at 10 ms per
        // 100-ms picture back to the floor.
        assert!(ds[70] < 150 && ds[70] > 20, "{ds:?}");
        assert_eq!(ds[119], 20, "{ds:?}");
    }

    /// Key pictures every 2 s (30 pictures at 15 fps) decoded 400 ms after the rest, which
    /// take 60 ms: with the defaults only the first key picture is late; the buffer then
    /// holds every picture at the key pictures' lateness. With a
    /// buffer sized by the 0.95 quantile of 2 s within 150 ms, every key picture is late.
    #[test]
    fn periodic_late_key_pictures_are_absorbed_by_the_defaults() {
        let run = |c: &mut PlayoutClock| {
            let mut late = Vec::new();
            let mut prev_now = 0;
            for i in 0..300u64 {
                let capture = 1_000 * MS + i * 66_666_667;
                let lat = if i % 30 == 0 { 400 * MS } else { 60 * MS };
                let now = (capture + lat).max(prev_now);
                prev_now = now;
                if c.due((i * 6000) as u32, now).1 {
                    late.push(i);
                }
            }
            late
        };
        let mut d = PlayoutClock::new(0, MAX_JITTER_NS, QUANTILE, WINDOW_NS);
        let late = run(&mut d);
        assert!(late.iter().all(|&i| i < 30), "{late:?}");
        assert!(d.jitter_ns() >= 340 * MS && d.jitter_ns() <= 400 * MS);
        let late = run(&mut PlayoutClock::new(0, 150 * MS, 0.95, 2_000 * MS));
        assert!(
            late.iter().filter(|&&i| i % 30 == 0).count() >= 9,
            "{late:?}"
        );
    }

    /// A quantile below 1 leaves the rare late picture out of the buffer; the picture
    /// itself is shown late (a hold) and the buffer rises to it at once, so the pictures
    /// queued behind it (here 45, 30 and 15 ms later than usual, as the frames after a key
    /// picture's at the sender) keep their spacing instead of being shown at once after the
    /// hold; then it drains back to the quantile. 30 fps, transit 40 ms, every 60th picture
    /// 60 ms late.
    #[test]
    fn a_late_picture_raises_the_buffer_and_those_behind_it_keep_their_spacing() {
        let mut c = PlayoutClock::new(0, MAX_JITTER_NS, 0.9, WINDOW_NS);
        let period = 33_333_333u64;
        let (mut prev_due, mut prev_now) = (0u64, 0u64);
        let (mut holds, mut min_gap, mut buffers) = (0, u64::MAX, Vec::new());
        for i in 0..600u64 {
            let capture = 1_000 * MS + i * period;
            let extra = [60, 45, 30, 15]
                .get((i % 60) as usize)
                .copied()
                .unwrap_or(0);
            let now = (capture + 40 * MS + extra * MS).max(prev_now);
            prev_now = now;
            let (due, late) = c.due((i * 3000) as u32, now);
            if i >= 60 {
                holds += late as u32;
                min_gap = min_gap.min(due - prev_due);
                buffers.push(due - capture);
            }
            prev_due = due;
        }
        // One hold per late picture, none for the pictures behind it.
        assert_eq!(holds, 9);
        assert!(min_gap >= period * 85 / 100, "gap {min_gap}");
        // Most of the time the buffer is the usual transit, not the late picture's.
        buffers.sort_unstable();
        let p50 = buffers[buffers.len() / 2];
        assert!(p50 <= 45 * MS, "p50 {p50}");
    }

    /// 30 fps, transit 40 ms. A queue shared with a bulk flow: for 4 s in every 15 every
    /// picture is 300 ms later (the flow's peak). With the 8-s window alone each peak
    /// after the first comes to a buffer that forgot the last one: its first picture is held
    /// back by the rise, a freeze each. While the fastest picture of each second swings like that, the
    /// buffer is sized by 40 s and holds the peak. A single late picture (a key picture's
    /// frame: the rest of its second is fast) is no swing: forgotten after 8 s as before.
    #[test]
    fn a_swinging_queue_is_remembered_longer_than_a_late_picture() {
        let period = 33_333_333u64;
        let run = |c: &mut PlayoutClock, extra: &dyn Fn(u64) -> u64| {
            let (mut holds, mut prev_now, mut prev_due) = (0, 0u64, 0u64);
            for i in 0..1800u64 {
                let capture = 1_000 * MS + i * period;
                let now = (capture + 40 * MS + extra(i) * MS).max(prev_now);
                prev_now = now;
                let (due, _) = c.due((i * 3000) as u32, now);
                // Held on screen for 150 ms more than a frame period, after the first peak.
                holds += (i > 600 && due - prev_due > period + 150 * MS) as u32;
                prev_due = due;
            }
            holds
        };
        let peaks = |i: u64| if i % 450 >= 330 { 300 } else { 0 };
        let mut short =
            PlayoutClock::new(0, MAX_JITTER_NS, QUANTILE, WINDOW_NS).with_long_window(0);
        assert!(run(&mut short, &peaks) >= 2);
        let mut long = PlayoutClock::new(0, MAX_JITTER_NS, QUANTILE, WINDOW_NS);
        assert_eq!(run(&mut long, &peaks), 0);
        assert!(long.jitter_ns() >= 290 * MS);
        // One picture 300 ms late at 10 s, then a steady path: forgotten after 8 s.
        let mut c = PlayoutClock::new(0, MAX_JITTER_NS, QUANTILE, WINDOW_NS);
        run(&mut c, &|i| if i == 300 { 300 } else { 0 });
        assert!(c.jitter_ns() <= 5 * MS, "{}", c.jitter_ns());
    }

    /// A lower path that starts between two peaks of a swinging queue (a viewer whose
    /// controller dropped to the base layer and climbed back, behind a CUBIC download) moves
    /// the history to the top path's 8-s window: the per-second floors stay, so the next
    /// peak finds the buffer still at the last one's and no picture is held on screen.
    #[test]
    fn a_lower_path_starting_keeps_the_swinging_queues_peak() {
        let period = 33_333_333u64;
        let peaks = |i: u64| if i % 450 >= 330 { 300 } else { 0 };
        let mut c = PlayoutClock::new(0, MAX_JITTER_NS, QUANTILE, WINDOW_NS);
        let (mut holds, mut prev_due) = (0, 0u64);
        for i in 0..1000u64 {
            let (ts, capture) = ((i * 3000) as u32, 1_000 * MS + i * period);
            let lower = capture + (40 + peaks(i)) * MS;
            if i < 480 {
                // One path until 16 s (after the first peak, 11-15 s).
                prev_due = c.due(ts, lower).0;
                continue;
            }
            if i == 480 {
                c.lower_path_starts();
            }
            c.observe(ts, lower);
            c.top_decoded(ts, lower + 10 * MS);
            let (due, _) = c.place(ts, lower + 10 * MS);
            // The second peak (26-30 s): held on screen 150 ms over a frame period.
            holds += (due - prev_due > period + 150 * MS) as u32;
            prev_due = due;
        }
        assert_eq!(holds, 0);
        assert!(c.jitter_ns() >= 290 * MS, "{}", c.jitter_ns());
    }
}
