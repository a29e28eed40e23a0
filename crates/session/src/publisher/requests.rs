//! Media requests aggregated at the sender: however many receivers ask, the encoder is asked
//! for at most one key picture or re-sync per [`KEY_REQUEST_MIN_INTERVAL`], counted from the
//! last key picture (periodic or requested) or re-sync it sent. A request that comes within
//! the interval waits for its end; it is not lost.

use proto::Time;
use std::time::Duration;

/// Requested key pictures come no sooner than this after any key picture: a join storm costs
/// at most two key pictures per second, and a joiner waits at most this long on top of the
/// next picture. (With 1 s, 3 of 5 bench joins waited 0.85-0.9 s for their key picture and
/// join to first frame rose to 1.3-1.4 s at load 11-15.)
pub const KEY_REQUEST_MIN_INTERVAL: Duration = Duration::from_millis(500);

/// What the encoder is asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EncoderControl {
    /// A key picture on the next TL0 picture.
    KeyPicture,
    /// Re-sync these spatial layers (bit s = layer s) on the next TL0 picture.
    Resync(u8),
    /// A new total bitrate target (TFMCC sessions follow the rate), kbit/s, with the rate it
    /// follows (the window mean) and `min(X, ceiling)` at the switch, bit/s.
    Target {
        kbps: u32,
        rate_bps: f64,
        x_bps: f64,
    },
}

/// The aggregation state.
#[derive(Clone, Debug, Default)]
pub struct Requests {
    key_pending: bool,
    sync_mask: u8,
    last_key: Option<Time>,
    last_big: Option<Time>,
    /// Requests received (key pictures and re-syncs).
    pub received: u64,
    /// Key pictures and re-syncs asked of the encoder.
    pub keys_asked: u64,
    pub syncs_asked: u64,
}

impl Requests {
    pub fn key(&mut self) {
        self.received += 1;
        self.key_pending = true;
    }

    pub fn resync(&mut self, spatial: u8) {
        if (1..8).contains(&spatial) {
            self.received += 1;
            self.sync_mask |= 1 << spatial;
        }
    }

    /// The encoder made a picture: a key picture or re-sync restarts the spacing.
    pub fn picture(&mut self, now: Time, key: bool, sync: bool) {
        if key {
            self.last_key = Some(now);
        }
        if key || sync {
            self.last_big = Some(now);
        }
    }

    fn ready(last: Option<Time>, now: Time) -> bool {
        last.is_none_or(|t| now.saturating_since(t) >= KEY_REQUEST_MIN_INTERVAL)
    }

    /// What to ask the encoder now, if anything.
    pub fn poll(&mut self, now: Time) -> Option<EncoderControl> {
        if self.key_pending && Self::ready(self.last_key, now) {
            self.key_pending = false;
            self.last_key = Some(now);
            self.last_big = Some(now);
            self.keys_asked += 1;
            return Some(EncoderControl::KeyPicture);
        }
        if self.sync_mask != 0 && Self::ready(self.last_big, now) {
            let m = std::mem::take(&mut self.sync_mask);
            self.last_big = Some(now);
            self.syncs_asked += 1;
            return Some(EncoderControl::Resync(m));
        }
        None
    }

    /// When a waiting request becomes due.
    pub fn deadline(&self) -> Option<Time> {
        let at = |l: Option<Time>| l.map_or(Time::ZERO, |t| t + KEY_REQUEST_MIN_INTERVAL);
        let k = self.key_pending.then(|| at(self.last_key));
        let s = (self.sync_mask != 0).then(|| at(self.last_big));
        match (k, s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storm_of_requests_asks_for_two_key_pictures_a_second() {
        let mut r = Requests::default();
        let mut asked = Vec::new();
        // 50 receivers ask every 20 ms for 2 s.
        for i in 0..100u64 {
            let now = Time::from_millis(1000 + 20 * i);
            r.key();
            if let Some(c) = r.poll(now) {
                asked.push((now, c));
            }
        }
        assert_eq!(r.received, 100);
        assert_eq!(asked.len(), 4, "{asked:?}");
        assert!(asked
            .windows(2)
            .all(|w| w[1].0.saturating_since(w[0].0) >= KEY_REQUEST_MIN_INTERVAL));
        // A request right after a periodic key picture waits for the interval, then goes.
        let mut r = Requests::default();
        r.picture(Time::from_millis(0), true, false);
        r.key();
        assert_eq!(r.poll(Time::from_millis(100)), None);
        assert_eq!(r.deadline(), Some(Time::from_millis(500)));
        assert_eq!(
            r.poll(Time::from_millis(500)),
            Some(EncoderControl::KeyPicture)
        );
        // Re-syncs of two layers within the interval go out together.
        r.resync(1);
        r.resync(2);
        r.resync(9); // not a spatial layer: ignored
        assert_eq!(r.poll(Time::from_millis(600)), None);
        assert_eq!(
            r.poll(Time::from_millis(1000)),
            Some(EncoderControl::Resync(0b110))
        );
        assert_eq!(r.poll(Time::from_millis(2000)), None);
        assert_eq!((r.keys_asked, r.syncs_asked, r.received), (1, 1, 3));
    }
}
