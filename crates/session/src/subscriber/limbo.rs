//! Media of a new sender instance, held until its announcement is accepted.
//!
//! Why: a restarted sender (new SSRCs on the same groups) starts sending before the receiver
//! has accepted its announcement (the new signing key has to be fetched first, up to about a
//! second). Its first packets carry the new encoder's first key picture; handed to the old
//! session's decoder they were thrown away with it when the decoder was rebuilt for the new
//! session, and the decoder then waited for the next key picture: 2.5-2.8 s to decode again
//! instead of 0.2 s (docs/reliability.md, "sender restart"). Held here, they are delivered
//! right after the new session's `SessionChanged` event.
//!
//! Bounded in packets, bytes and time. When full, newer packets are refused (counted), not
//! older ones: the oldest hold the key picture the new decoder needs first. Entered only when
//! a stream already received changes SSRC, so a first join never waits here.

use proto::Time;
use serde::Serialize;
use std::time::Duration;

/// Most packets held for a new sender instance (a 2.5-Mbit/s session of 1200-B packets sends
/// about 260 a second; the announcement normally follows within a second).
pub const LIMBO_MAX_PACKETS: usize = 4096;
/// Most bytes held.
pub const LIMBO_MAX_BYTES: usize = 4 << 20;
/// Longest hold: without a new announcement by then the SSRC change was not a new session
/// (or a forged packet), and the held packets go to the current session as before.
pub const LIMBO_MAX: Duration = Duration::from_secs(3);

/// One held media packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub layer: u8,
    pub ssrc: u32,
    pub recv_time: Time,
    pub packet: Vec<u8>,
}

/// What the restart holding did (the player logs it as `restart`).
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LimboStats {
    /// Times a new sender instance was seen and holding began.
    pub episodes: u64,
    /// Packets held.
    pub held: u64,
    /// Held packets delivered to a new session.
    pub replayed: u64,
    /// Held packets delivered to the current session because no new announcement came in time.
    pub flushed: u64,
    /// Packets refused because the hold was full, or discarded (new session without media).
    pub dropped: u64,
}

/// The hold.
#[derive(Default, Debug)]
pub struct Limbo {
    since: Option<Time>,
    pkts: Vec<Held>,
    bytes: usize,
    pub stats: LimboStats,
}

impl Limbo {
    pub fn active(&self) -> bool {
        self.since.is_some()
    }

    /// Starts holding (a stream saw a new SSRC at `at`); no-op when already holding.
    pub fn begin(&mut self, at: Time) {
        if self.since.is_none() {
            self.since = Some(at);
            self.stats.episodes += 1;
        }
    }

    pub fn push(&mut self, h: Held) {
        if self.pkts.len() >= LIMBO_MAX_PACKETS || self.bytes + h.packet.len() > LIMBO_MAX_BYTES {
            self.stats.dropped += 1;
            return;
        }
        self.bytes += h.packet.len();
        self.stats.held += 1;
        self.pkts.push(h);
    }

    /// Whether the hold has outlived [`LIMBO_MAX`] at `now`.
    pub fn expired(&self, now: Time) -> bool {
        self.since
            .is_some_and(|s| now.saturating_since(s) >= LIMBO_MAX)
    }

    /// When the hold expires, if holding.
    pub fn deadline(&self) -> Option<Time> {
        self.since.map(|s| s + LIMBO_MAX)
    }

    /// Ends holding; the held packets in arrival order.
    pub fn take(&mut self) -> Vec<Held> {
        self.since = None;
        self.bytes = 0;
        std::mem::take(&mut self.pkts)
    }

    /// Ends holding and returns what was held for delivery (counted `replayed` for a new
    /// session, `flushed` for the current one), or nothing when there is nowhere to deliver it
    /// (counted `dropped`).
    pub fn release(&mut self, deliver: bool, new_session: bool) -> Vec<Held> {
        let pkts = self.take();
        let n = pkts.len() as u64;
        if !deliver {
            self.stats.dropped += n;
            return Vec::new();
        }
        if new_session {
            self.stats.replayed += n;
        } else {
            self.stats.flushed += n;
        }
        pkts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(layer: u8, byte: u8, len: usize, t: u64) -> Held {
        Held {
            layer,
            ssrc: 1,
            recv_time: Time(t),
            packet: vec![byte; len],
        }
    }

    #[test]
    fn limbo_keeps_the_oldest_packets_within_its_bounds() {
        let mut l = Limbo::default();
        assert!(!l.active());
        l.begin(Time(1_000));
        l.begin(Time(2_000)); // already holding: same episode
        assert_eq!(l.stats.episodes, 1);
        for i in 0..LIMBO_MAX_PACKETS + 10 {
            l.push(held((i % 3) as u8, i as u8, 8, 1_000 + i as u64));
        }
        assert_eq!(l.stats.held, LIMBO_MAX_PACKETS as u64);
        assert_eq!(l.stats.dropped, 10);
        let max = LIMBO_MAX.as_nanos() as u64;
        assert!(!l.expired(Time(1_000 + max - 1)));
        assert!(l.expired(Time(1_000 + max)));
        assert_eq!(l.deadline(), Some(Time(1_000 + max)));
        let got = l.take();
        assert!(!l.active());
        assert_eq!(got.len(), LIMBO_MAX_PACKETS);
        // Arrival order, the first packets (the key picture) kept, the last ones refused.
        assert_eq!(got[0], held(0, 0, 8, 1_000));
        assert!(got.windows(2).all(|w| w[0].recv_time < w[1].recv_time));
        assert_eq!(
            got.last().unwrap().recv_time,
            Time(1_000 + LIMBO_MAX_PACKETS as u64 - 1)
        );
        // Byte bound: a few large datagrams fill it before the packet bound.
        let mut l = Limbo::default();
        l.begin(Time::ZERO);
        for i in 0..LIMBO_MAX_BYTES / 2048 + 5 {
            l.push(held(0, 0, 2048, i as u64));
        }
        assert_eq!(l.stats.held, (LIMBO_MAX_BYTES / 2048) as u64);
        assert_eq!(l.stats.dropped, 5);
        // Nowhere to deliver them (the new session has no media): counted as dropped.
        assert!(l.release(false, true).is_empty());
        assert_eq!(l.stats.dropped, 5 + (LIMBO_MAX_BYTES / 2048) as u64);
        assert_eq!(l.stats.replayed, 0);
        assert!(!l.active() && l.take().is_empty());
        // Delivered: counted by whose session it went to.
        l.begin(Time::ZERO);
        l.push(held(0, 1, 10, 1));
        assert_eq!(l.release(true, false).len(), 1);
        assert_eq!(l.stats.flushed, 1);
    }
}
