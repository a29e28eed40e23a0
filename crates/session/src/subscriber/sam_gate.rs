//! What the announcement path spends on signatures (F10). The SAM group is any-source, so any
//! LAN host can send well-formed SAMs with a copied key id; each costs an Ed25519
//! verification. The gate skips, before any cryptography, a SAM whose sequence number is not
//! newer than the newest verified one of its session (a replay, or a forgery that cannot
//! advance anything), and spends at most `per_sec` verifications a second (burst
//! `2 × per_sec`) on the rest. It also tells how long no SAM has verified, so that a refresh of
//! the description is asked only when verification has stopped working, not for every forgery.

use proto::{SessionInfo, Time};
use std::time::Duration;

/// Sessions whose newest verified sequence number the gate remembers.
const SESSIONS: usize = 16;

#[derive(Debug)]
pub struct SamGate {
    per_sec: f64,
    tokens: f64,
    last: Option<Time>,
    /// Newest verified `announce_seq` per session id.
    newest: Vec<(u32, u32)>,
    last_verified: Option<Time>,
    /// SAMs skipped as not newer, and as over the verification budget.
    pub skipped_old: u64,
    pub over_budget: u64,
}

impl SamGate {
    pub fn new(per_sec: f64) -> SamGate {
        SamGate {
            per_sec,
            tokens: 2.0 * per_sec,
            last: None,
            newest: Vec::new(),
            last_verified: None,
            skipped_old: 0,
            over_budget: 0,
        }
    }

    /// Whether this SAM is worth a signature check now.
    pub fn admit(&mut self, bytes: &[u8], now: Time) -> bool {
        if let Ok(d) = proto::wire::sam::decode(bytes) {
            let (id, seq) = (d.info.session_id, d.info.announce_seq);
            if let Some(&(_, top)) = self.newest.iter().find(|(s, _)| *s == id) {
                // Serial-number order: newer is 1..2^31 ahead.
                if (seq.wrapping_sub(top) as i32) <= 0 {
                    self.skipped_old += 1;
                    return false;
                }
            }
        }
        let dt = self
            .last
            .map_or(0.0, |l| now.saturating_since(l).as_secs_f64());
        self.last = Some(now);
        self.tokens = (self.tokens + dt * self.per_sec).min(2.0 * self.per_sec);
        if self.tokens < 1.0 {
            self.over_budget += 1;
            return false;
        }
        self.tokens -= 1.0;
        true
    }

    /// Records a SAM that verified.
    pub fn verified(&mut self, info: &SessionInfo, now: Time) {
        self.last_verified = Some(now);
        match self.newest.iter_mut().find(|(s, _)| *s == info.session_id) {
            Some(e) => e.1 = info.announce_seq,
            None => {
                if self.newest.len() >= SESSIONS {
                    self.newest.remove(0);
                }
                self.newest.push((info.session_id, info.announce_seq));
            }
        }
    }

    /// Whether no SAM has verified for `d` (or none ever did).
    pub fn quiet_for(&self, d: Duration, now: Time) -> bool {
        self.last_verified
            .is_none_or(|t| now.saturating_since(t) >= d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn info(id: u32, seq: u32) -> SessionInfo {
        SessionInfo {
            session_id: id,
            announce_seq: seq,
            sender: Ipv4Addr::new(10, 0, 0, 1),
            layers: vec![proto::LayerInfo {
                rate_bps: 100_000,
                group: Ipv4Addr::new(239, 1, 1, 1),
                port: 5004,
            }],
            packet_size: 512,
            bunch_len: 2,
            adapt_interval: Duration::from_secs(1),
            announce_interval: Duration::from_secs(1),
            tracks: vec![],
            feedback_port: None,
            retransmission: false,
        }
    }

    /// F10: 20,000 forged SAMs in one second cost at most the budget's verifications; once a
    /// genuine SAM has verified, forgeries that do not advance its sequence cost none.
    #[test]
    fn sam_verification_is_budgeted() {
        let signer = security::auth::SamSigner::from_seed(&[3; 32]);
        let forger = security::auth::SamSigner::from_seed(&[4; 32]);
        let t0 = Time::from_secs_f64(100.0);
        let mut g = SamGate::new(50.0);
        let mut admitted = 0;
        for i in 0..20_000u32 {
            let b = forger.to_signed_bytes(&info(7, 1000 + i), 1).unwrap();
            let now = t0 + Duration::from_micros(50 * u64::from(i));
            if g.admit(&b, now) {
                admitted += 1;
            }
        }
        assert!(admitted <= 100 + 50, "{admitted} verifications in 1 s");
        assert!(g.over_budget >= 19_800);
        let now = t0 + Duration::from_secs(2);
        assert!(g.quiet_for(Duration::from_secs(3), now));
        let good = info(7, 50_000);
        assert!(g.admit(&signer.to_signed_bytes(&good, 1).unwrap(), now));
        g.verified(&good, now);
        assert!(!g.quiet_for(Duration::from_secs(3), now));
        // Replays and forgeries at or below the verified sequence: skipped, no budget spent.
        let before = g.over_budget;
        for seq in [49_000, 50_000] {
            let b = forger.to_signed_bytes(&info(7, seq), 1).unwrap();
            assert!(!g.admit(&b, now));
        }
        assert_eq!((g.skipped_old, g.over_budget), (2, before));
    }
}
