//! The stale-delay filter: a packet whose delay exceeds the smallest recent one by
//! [`STALE_US`] sat in a queue (typically the kernel's unresolved-route queue at the multicast
//! router, which holds the first packets of a group from before anyone joined and forwards
//! them when the route is installed, seconds later). Fed to a controller it would read as a
//! burst of loss, so it is dropped.
//!
//! "Delay" is receive time minus the sender's timestamp: path delay plus the two clocks'
//! offset; only differences between packets matter.

use proto::Time;

/// A packet whose delay exceeds the smallest recent one by this much is stale.
pub const STALE_US: i64 = 500_000;
/// An unbroken run of stale packets this long (arrival time) means the path's delay rose for
/// good, not a flushed router queue: the delay floor is rebuilt ([`StaleFilter::is_stale`]).
pub const RESTALE_NS: u64 = 1_000_000_000;
/// The floor is the minimum over the current and the previous window of this length, so that
/// a sender clock step or a new sender heals within two windows.
const WINDOW_NS: u64 = 5_000_000_000;

/// The windowed delay floor and the stale-run state.
#[derive(Default, Debug, Clone)]
pub struct StaleFilter {
    off_cur: Option<i64>,
    off_prev: Option<i64>,
    window_start: u64,
    /// Receive time of the first of an unbroken run of stale packets, and the least delay in
    /// that run.
    stale_since: Option<u64>,
    stale_min: i64,
    /// Times a run of stale packets lasted [`RESTALE_NS`] and the floor was rebuilt from it.
    pub resets: u64,
}

/// Receive time minus send time, µs.
pub fn offset_us(recv: Time, send_time_us: u64) -> i64 {
    (recv.as_nanos() / 1_000) as i64 - send_time_us as i64
}

impl StaleFilter {
    /// The floor: the smallest delay of the current and previous window.
    pub fn min_offset(&self) -> Option<i64> {
        match (self.off_cur, self.off_prev) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A packet received at `at` with delay `off` was fed.
    pub fn note(&mut self, at: Time, off: i64) {
        let ts = at.as_nanos();
        if ts.saturating_sub(self.window_start) > WINDOW_NS {
            self.off_prev = self.off_cur.take();
            self.window_start = ts;
        }
        self.off_cur = Some(self.off_cur.map_or(off, |m| m.min(off)));
    }

    /// Forgets the floor (a new session: another sender, another clock).
    pub fn reset(&mut self) {
        self.off_cur = None;
        self.off_prev = None;
    }

    /// Whether a packet received at `at` with delay `off` (µs) is stale: more than
    /// [`STALE_US`] above the floor.
    ///
    /// Only packets that are fed update the floor, so if the path's delay rises by more than
    /// `STALE_US` for good (a deep queue that stays, a route change) every later packet would
    /// read as stale and the session would be locked out. A router's unresolved-route queue,
    /// which the filter is for, is flushed in one burst; so when every packet for
    /// [`RESTALE_NS`] of arrival time has been stale, the delay has really risen: the floor
    /// is rebuilt from the least delayed packet of that run (counted in `resets`).
    pub fn is_stale(&mut self, at: Time, off: i64) -> bool {
        let ts = at.as_nanos();
        let Some(m) = self.min_offset() else {
            return false;
        };
        if off <= m + STALE_US {
            self.stale_since = None;
            return false;
        }
        match self.stale_since {
            None => {
                self.stale_since = Some(ts);
                self.stale_min = off;
            }
            Some(_) => self.stale_min = self.stale_min.min(off),
        }
        let since = self.stale_since.unwrap_or(ts);
        if ts.saturating_sub(since) < RESTALE_NS {
            return true;
        }
        let floor = self.stale_min;
        self.reset();
        self.window_start = ts;
        self.off_cur = Some(floor);
        self.stale_since = None;
        self.resets += 1;
        off > floor + STALE_US
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A flushed router queue (a burst of old packets between fresh ones) is dropped and the
    /// floor stays; a delay rise that lasts rebuilds the floor after `RESTALE_NS` instead of
    /// locking the session out.
    #[test]
    fn stale_burst_dropped_lasting_rise_rebuilds_the_floor() {
        let mut t = StaleFilter::default();
        // 2 s of packets at 20 ms delay, one every 10 ms.
        let mut ts = 0;
        for _ in 0..200 {
            ts += 10 * MS;
            assert!(!t.is_stale(Time(ts), 20_000));
            t.note(Time(ts), 20_000);
        }
        // A flushed queue: 50 packets 3 s old within 5 ms, then fresh packets again.
        for i in 0..50 {
            assert!(t.is_stale(Time(ts + i * 100_000), 3_000_000));
        }
        ts += 10 * MS;
        assert!(!t.is_stale(Time(ts), 21_000));
        assert_eq!(t.resets, 0);
        // The path's delay rises by 800 ms and stays: stale for just under 1 s, then the floor
        // moves up to the run's least delay and packets are fed again.
        let mut dropped = 0;
        let mut fed_at = None;
        for _ in 0..300 {
            ts += 10 * MS;
            if t.is_stale(Time(ts), 820_000) {
                dropped += 1;
            } else {
                fed_at.get_or_insert(ts);
                t.note(Time(ts), 820_000);
            }
        }
        assert_eq!(t.resets, 1);
        assert_eq!(
            dropped, 100,
            "stale for RESTALE_NS of arrival time, then fed"
        );
        assert_eq!(t.min_offset(), Some(820_000));
        assert!(fed_at.is_some());
        // A later fall in delay is simply the new minimum.
        ts += 10 * MS;
        assert!(!t.is_stale(Time(ts), 20_000));
    }
}
