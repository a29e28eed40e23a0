//! Virtual and real time share one type.
//!
//! Controllers never read a clock: every input carries `now`. A [`Time`] is a count of
//! nanoseconds since an arbitrary epoch chosen by the caller (the simulator starts at zero,
//! the player uses the kernel's `CLOCK_REALTIME` receive timestamps). Only differences
//! between two `Time`s from the same source are meaningful.

use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, nanoseconds since the caller's epoch.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Time(pub u64);

impl Time {
    /// The epoch itself.
    pub const ZERO: Time = Time(0);
    /// A time later than any real one; used for "no timeout".
    pub const NEVER: Time = Time(u64::MAX);

    /// Builds a time from seconds (floating point), saturating at zero.
    pub fn from_secs_f64(s: f64) -> Time {
        Time((s.max(0.0) * 1e9) as u64)
    }
    /// Builds a time from microseconds.
    pub const fn from_micros(us: u64) -> Time {
        Time(us.saturating_mul(1_000))
    }
    /// Builds a time from milliseconds.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(1_000_000))
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    /// Seconds since the epoch, as a float (for rates and logs).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// The first point of the grid `due + k·period` (k ≥ 1) after `now`, for a periodic timer
    /// that fired at `now ≥ due`: late wake-ups neither shift the grid nor fire it twice.
    pub fn next_on_grid(due: Time, now: Time, period: Duration) -> Time {
        let p = (period.as_nanos().min(u64::MAX as u128) as u64).max(1);
        let behind = now.0.saturating_sub(due.0);
        Time(
            due.0
                .saturating_add((behind / p).saturating_add(1).saturating_mul(p)),
        )
    }

    /// `self - earlier`, or zero if `earlier` is later (clocks that step backwards must not panic).
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_sub(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    /// Saturating: a later minus an earlier time; zero if the order is reversed.
    fn sub(self, rhs: Time) -> Duration {
        self.saturating_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let t = Time::from_millis(5);
        assert_eq!(t - Time::from_millis(7), Duration::ZERO);
        assert_eq!(Time::NEVER + Duration::from_secs(1), Time::NEVER);
        assert_eq!(t + Duration::from_millis(1), Time::from_micros(6_000));
        assert_eq!(Time::from_secs_f64(1.5).as_micros(), 1_500_000);
        let ms = Duration::from_millis(100);
        assert_eq!(
            Time::next_on_grid(Time::from_millis(1000), Time::from_millis(1000), ms),
            Time::from_millis(1100)
        );
        assert_eq!(
            Time::next_on_grid(Time::from_millis(1000), Time::from_millis(1250), ms),
            Time::from_millis(1300)
        );
    }
}
