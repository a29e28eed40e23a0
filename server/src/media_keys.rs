//! Media key rotation of an encrypted session (docs/security.md §3 and §9.3).
//!
//! The control plane's view of a session's keys: the key in use (epoch e), and during a
//! rotation the next one (e+1), served by the key API for a *lead* time before the sealers
//! switch to it, so that every player that re-fetches its keys at least once per lead holds it
//! before the first packet sealed with it arrives (`key_refresh_ms` in the key API's answer
//! tells players how often to re-fetch, `media_key_refresh_ms`). After the switch the old key is still served for one
//! more lead (players that ask then still open packets in flight across the switch), then
//! dropped: a viewer that stopped fetching keys is cut off at the switch.
//!
//! The sealers live on the media thread (the pacer's publisher and the audio side); they get
//! the next key over a lock-free queue each ([`NextKeys`]) at the switch, and take it at their
//! next packet. Keys are generated fresh (OS RNG) and never stored, as at session start.

use crate::error::{Error, Result};
use crate::state::lock;
use security::auth::{GroupKey, MediaSealer, NextKeys};
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Lead of a rotation when the request names none: three of the default refresh intervals
/// (`media_key_refresh_ms`, 10 s; players re-fetch the keys that often, so a lead of at least
/// twice the interval reaches every player that follows it before the switch).
pub const DEFAULT_LEAD: Duration = Duration::from_secs(30);
/// Shortest lead accepted (tests use short leads; players then rely on the fallback refresh
/// when packets stop opening, docs/security.md §9.3).
pub const MIN_LEAD: Duration = Duration::from_millis(500);
/// Longest lead accepted.
pub const MAX_LEAD: Duration = Duration::from_secs(3600);

/// The keys of one encrypted session and the sealers' queues.
pub struct MediaKeys {
    /// How often players are told to fetch the keys again.
    pub refresh: Duration,
    ring: Mutex<Ring>,
    handovers: Mutex<Vec<NextKeys>>,
}

struct Ring {
    current: GroupKey,
    /// The next key and when the sealers switch to it.
    next: Option<(GroupKey, Instant, u64, Duration)>,
    /// The key before the last switch, served until the instant given.
    previous: Option<(GroupKey, Instant)>,
    rotations: u64,
}

/// A rotation that was scheduled.
#[derive(Clone, Debug)]
pub struct Scheduled {
    pub epoch: u16,
    pub lead: Duration,
    /// Unix ms of the switch (the wall clock's view; the switch itself runs on the monotonic
    /// clock, so a step of the wall clock moves this figure, not the switch).
    pub switch_at_unix_ms: u64,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl MediaKeys {
    /// A fresh epoch-0 key and `sealers` rotatable sealers sealing with it; players are told
    /// to fetch the keys every `refresh`.
    pub fn generate(sealers: usize, refresh: Duration) -> (MediaKeys, Vec<MediaSealer>) {
        let key = GroupKey::generate(0);
        let (s, h): (Vec<_>, Vec<_>) = (0..sealers)
            .map(|_| MediaSealer::rotatable(key.clone()))
            .unzip();
        let k = MediaKeys {
            refresh,
            ring: Mutex::new(Ring {
                current: key,
                next: None,
                previous: None,
                rotations: 0,
            }),
            handovers: Mutex::new(h),
        };
        (k, s)
    }

    /// The key in use.
    pub fn current(&self) -> GroupKey {
        lock(&self.ring).current.clone()
    }

    /// Switches completed since the start.
    pub fn rotations(&self) -> u64 {
        lock(&self.ring).rotations
    }

    /// Makes the next epoch's key and schedules the switch `lead` from `now`. Refused while
    /// another rotation is pending (409), or with a lead out of bounds (400).
    pub fn schedule(&self, lead: Duration, now: Instant) -> Result<Scheduled> {
        if !(MIN_LEAD..=MAX_LEAD).contains(&lead) {
            return Err(Error::BadRequest(format!(
                "lead_ms must be {}..={}",
                MIN_LEAD.as_millis(),
                MAX_LEAD.as_millis()
            )));
        }
        let mut r = lock(&self.ring);
        if let Some((k, _, at, _)) = &r.next {
            return Err(Error::Conflict(format!(
                "a rotation to epoch {} is pending (switch at {at} Unix ms)",
                k.epoch()
            )));
        }
        let epoch = r.current.epoch().wrapping_add(1);
        let at = unix_ms() + lead.as_millis() as u64;
        r.next = Some((GroupKey::generate(epoch), now + lead, at, lead));
        Ok(Scheduled {
            epoch,
            lead,
            switch_at_unix_ms: at,
        })
    }

    /// Carries out a due switch: hands the next key to every sealer and makes it current.
    /// Returns whether it switched. A sealer whose queue is full (its thread has stopped) is
    /// skipped; the others switch.
    pub fn switch_if_due(&self, now: Instant) -> bool {
        let mut r = lock(&self.ring);
        let due = matches!(&r.next, Some((_, at, _, _)) if now >= *at);
        if !due {
            return false;
        }
        let Some((k, _, _, lead)) = r.next.take() else {
            return false;
        };
        for h in lock(&self.handovers).iter_mut() {
            let _ = h.hand_over(k.clone());
        }
        let old = std::mem::replace(&mut r.current, k);
        r.previous = Some((old, now + lead.max(self.refresh)));
        r.rotations += 1;
        true
    }

    /// The key API's media part: the key in use as `epoch`/`media_key` (what players before
    /// rotation read), every key a player should hold now in `keys` (oldest first: the one
    /// before the last switch while it is still served, the current one, the next one during
    /// a lead), the pending switch, and how often to ask again.
    pub fn json(&self, now: Instant) -> serde_json::Map<String, Value> {
        let r = lock(&self.ring);
        let entry = |k: &GroupKey| json!({"epoch": k.epoch(), "media_key": k.key_hex()});
        let mut keys = Vec::new();
        if let Some((k, until)) = &r.previous {
            if now < *until {
                keys.push(entry(k));
            }
        }
        keys.push(entry(&r.current));
        let mut v = serde_json::Map::new();
        v.insert("cipher".into(), json!("chacha20-poly1305"));
        v.insert("epoch".into(), json!(r.current.epoch()));
        v.insert("media_key".into(), json!(r.current.key_hex()));
        if let Some((k, _, at, _)) = &r.next {
            keys.push(entry(k));
            v.insert("next_epoch".into(), json!(k.epoch()));
            v.insert("rotate_at_unix_ms".into(), json!(at));
        }
        v.insert("keys".into(), Value::Array(keys));
        v.insert(
            "key_refresh_ms".into(),
            json!(self.refresh.as_millis() as u64),
        );
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(v: &serde_json::Map<String, Value>) -> Vec<u64> {
        v["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["epoch"].as_u64().unwrap())
            .collect()
    }

    /// The served keys through a rotation: current only; current + next during the lead
    /// (a second rotation refused); at the switch the sealers get the key; then previous +
    /// current until the old key retires; then current only.
    #[test]
    fn a_rotation_serves_the_next_key_ahead_and_the_old_one_after() {
        let refresh = Duration::from_secs(10);
        let (k, mut sealers) = MediaKeys::generate(2, refresh);
        let t0 = Instant::now();
        assert_eq!(epochs(&k.json(t0)), vec![0]);
        assert!(k.schedule(Duration::from_millis(10), t0).is_err());
        let s = k.schedule(Duration::from_secs(2), t0).unwrap();
        assert_eq!(s.epoch, 1);
        let v = k.json(t0);
        assert_eq!((epochs(&v), v["epoch"].as_u64()), (vec![0, 1], Some(0)));
        assert!(matches!(
            k.schedule(Duration::from_secs(2), t0),
            Err(Error::Conflict(_))
        ));
        assert!(!k.switch_if_due(t0 + Duration::from_millis(1999)));
        let rtp = |seq: u16| {
            let mut p = vec![0x80, 96];
            p.extend_from_slice(&seq.to_be_bytes());
            p.extend_from_slice(&[0; 8]);
            p.extend_from_slice(b"payload");
            p
        };
        let before = sealers[0].seal(&rtp(1), 1).unwrap();
        assert!(k.switch_if_due(t0 + Duration::from_secs(2)));
        assert!(!k.switch_if_due(t0 + Duration::from_secs(3)));
        for s in &mut sealers {
            let p = s.seal(&rtp(2), 2).unwrap();
            assert_eq!(GroupKey::sealed_epoch(&p).unwrap(), 1);
        }
        assert_eq!(GroupKey::sealed_epoch(&before).unwrap(), 0);
        let after = t0 + Duration::from_secs(2);
        let v = k.json(after);
        assert_eq!((epochs(&v), v["epoch"].as_u64()), (vec![0, 1], Some(1)));
        assert!(v.get("next_epoch").is_none());
        assert_eq!(epochs(&k.json(after + refresh)), vec![1]);
        assert_eq!(k.rotations(), 1);
        // The next rotation may be scheduled once the switch is done.
        assert_eq!(k.schedule(MIN_LEAD, after).unwrap().epoch, 2);
    }
}
