//! Vetting of TFMCC receiver reports before the sender acts on them: plain plausibility
//! checks for unauthenticated sessions; for `auth_reports` sessions a per-source token
//! bucket, the MAC, the plausibility checks, a per-receiver replay check and the influence
//! limiter (docs/security.md §4).

use proto::wire::tfmcc::TfmccReport;
use proto::Time;
use security::auth::{InfluenceConfig, InfluenceLimiter, ReportMac};
use std::net::IpAddr;
use std::time::Duration;

/// Why a report was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    Malformed,
    Forged,
    Auth,
    /// Authenticated, but its timestamp is not newer than that receiver's last one.
    Replayed,
    /// Over its source address's report budget (or the limiter's tables are full).
    RateLimited,
}

/// Parses and vets one report against the sender's clock `now_us` (low 32 bits of µs).
/// For sessions without `auth_reports`: an authentication block is refused (`Auth`).
pub fn vet_report(bytes: &[u8], now_us: u32) -> Result<TfmccReport, Refused> {
    let rep = TfmccReport::parse(bytes).map_err(|_| Refused::Malformed)?;
    if rep.auth.kind != 0 || !rep.auth.tag.is_empty() {
        return Err(Refused::Auth);
    }
    plausible(rep, now_us)
}

/// The checks every report passes whatever its authentication: a non-zero receiver id and
/// an echo of something this sender sent.
fn plausible(rep: TfmccReport, now_us: u32) -> Result<TfmccReport, Refused> {
    if rep.rid == 0 {
        return Err(Refused::Forged);
    }
    // The echo is a data timestamp of ours plus the receiver's hold time: never ahead of
    // our clock, and never older than 60 s.
    match congestion::tfmcc::ts_diff_s(now_us, rep.echo_ts_us) {
        Some(age) if age <= 60.0 => Ok(rep),
        _ => Err(Refused::Forged),
    }
}

/// The sender's gate for receiver reports: plain vetting ([`vet_report`]) for sessions
/// without a report key; for `auth_reports` sessions the per-source token bucket, the MAC,
/// the plausibility checks, the replay check and the influence limiter, in that order (the
/// cheap checks first, so a flood costs a hash lookup per packet and no HMAC).
#[derive(Debug)]
pub struct ReportGate {
    mac: Option<ReportMac>,
    limiter: InfluenceLimiter,
}

impl ReportGate {
    /// A gate with the session's report secret (`None`: unauthenticated session) and the
    /// limiter's defaults (docs/security.md §4), except the per-source budget: the CLR
    /// reports once per RTT, checked at each data packet, so on a LAN (RTT ~1 ms) an honest
    /// CLR sends one report per packet it receives. The budget is therefore the session's
    /// packet rate at its ceiling (`max_packets_per_s`) plus 10 %, at least the library's
    /// 20/s, with a burst of two seconds' worth.
    pub fn new(mac: Option<ReportMac>, max_packets_per_s: f64) -> ReportGate {
        let d = InfluenceConfig::default();
        let per_s = if max_packets_per_s.is_finite() {
            (1.1 * max_packets_per_s).max(d.reports_per_sec)
        } else {
            d.reports_per_sec
        };
        ReportGate {
            mac,
            limiter: InfluenceLimiter::new(InfluenceConfig {
                reports_per_sec: per_s,
                burst: (2.0 * per_s).max(d.burst),
                ..d
            }),
        }
    }

    /// Reports whose rate the limiter raised so far.
    pub fn clamped(&self) -> u64 {
        self.limiter.stats().clamped
    }

    /// Vets one report from `src` at sender time `now`. `current` is the sender's X in
    /// bytes/s and `window` the limiter's window (the sender's `R_max`). On success the
    /// report's `x_rate` is what the sender may act on (raised by the limiter if need be).
    pub fn vet(
        &mut self,
        bytes: &[u8],
        now: Time,
        src: IpAddr,
        current: f64,
        window: Duration,
    ) -> Result<TfmccReport, Refused> {
        use congestion::error::Error as E;
        let now_us = now.as_micros() as u32;
        let Some(mac) = &self.mac else {
            return vet_report(bytes, now_us);
        };
        self.limiter
            .admit(now, src)
            .map_err(|_| Refused::RateLimited)?;
        let rep = mac.verify_tfmcc(bytes).map_err(|e| match e {
            E::Unauthenticated { .. } | E::AuthFailed { .. } => Refused::Auth,
            _ => Refused::Malformed,
        })?;
        let mut rep = plausible(rep, now_us)?;
        self.limiter
            .check_fresh(now, rep.rid, rep.ts_us)
            .map_err(|e| match e {
                E::Replayed { .. } => Refused::Replayed,
                _ => Refused::RateLimited,
            })?;
        let allowed = self
            .limiter
            .clamp(now, rep.rid, current, rep.x_rate as f64, window);
        if allowed > rep.x_rate as f64 {
            rep.x_rate = allowed.ceil().min(u32::MAX as f64) as u32;
        }
        Ok(rep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rid: u32, echo: u32) -> TfmccReport {
        TfmccReport {
            rid,
            round: 0,
            have_rtt: false,
            have_loss: false,
            leave: false,
            is_clr: false,
            ts_us: 5,
            echo_ts_us: echo,
            x_rate: 1000,
            x_recv: 500,
            rtt_us: 100_000,
            p_fixed: 0,
            auth: Default::default(),
        }
    }

    #[test]
    fn vetting_counts_malformed_forged_and_auth() {
        let now = 10_000_000u32;
        assert_eq!(vet_report(b"junk", now), Err(Refused::Malformed));
        assert_eq!(vet_report(&[], now), Err(Refused::Malformed));
        let ok = report(7, now - 50_000);
        assert_eq!(vet_report(&ok.to_bytes(), now), Ok(ok.clone()));
        // Echo from the future, echo older than 60 s, receiver id 0.
        let fut = report(7, now + 1_000);
        assert_eq!(vet_report(&fut.to_bytes(), now), Err(Refused::Forged));
        let old = report(7, now.wrapping_sub(61_000_000));
        assert_eq!(vet_report(&old.to_bytes(), now), Err(Refused::Forged));
        let zero = report(0, now - 1);
        assert_eq!(vet_report(&zero.to_bytes(), now), Err(Refused::Forged));
        let mut signed = report(7, now - 1);
        signed.auth.kind = 1;
        signed.auth.tag = vec![1, 2, 3, 4];
        assert_eq!(vet_report(&signed.to_bytes(), now), Err(Refused::Auth));
    }

    #[test]
    fn gate_checks_mac_replay_and_bounds_one_receivers_cut() {
        let mac = ReportMac::new([7; 32]);
        let key = mac.receiver_key(9);
        let mut gate = ReportGate::new(Some(mac), 0.0);
        let src: IpAddr = "10.0.0.2".parse().unwrap();
        let w = Duration::from_millis(100);
        let t = |ms: u64| Time::from_millis(1000 + ms);
        let now_us = |ms: u64| t(ms).as_micros() as u32;
        // Honest report: passes with its rate.
        let mut r = report(9, now_us(0) - 20_000);
        r.ts_us = 100;
        r.x_rate = 100_000;
        let sealed = key.seal_tfmcc(&r).unwrap();
        let ok = gate.vet(&sealed, t(0), src, 100_000.0, w).unwrap();
        assert_eq!((ok.rid, ok.x_rate), (9, 100_000));
        // Its replay: refused.
        assert_eq!(
            gate.vet(&sealed, t(1), src, 100_000.0, w),
            Err(Refused::Replayed)
        );
        // No MAC, a guessed MAC, the right MAC under another id's key: `Auth`.
        let mut plain = r.clone();
        plain.ts_us = 200;
        assert_eq!(
            gate.vet(&plain.to_bytes(), t(2), src, 100_000.0, w),
            Err(Refused::Auth)
        );
        let mut guessed = sealed.clone();
        let n = guessed.len();
        guessed[n - 1] ^= 1;
        assert_eq!(
            gate.vet(&guessed, t(3), src, 100_000.0, w),
            Err(Refused::Auth)
        );
        let other = ReportMac::new([7; 32]).receiver_key(10);
        let mut r10 = r.clone();
        r10.rid = 10;
        // Sealed under receiver 10's key, then relabelled as 9's (tag kept).
        let mut r9 = TfmccReport::parse(&other.seal_tfmcc(&r10).unwrap()).unwrap();
        r9.rid = 9;
        let relabelled = r9.to_bytes();
        assert_eq!(
            gate.vet(&relabelled, t(4), src, 100_000.0, w),
            Err(Refused::Auth)
        );
        // A genuine report asking for a tiny rate: raised to half of X at the window's start.
        let mut low = r.clone();
        low.ts_us = 300;
        low.x_rate = 10;
        let got = gate
            .vet(&key.seal_tfmcc(&low).unwrap(), t(5), src, 100_000.0, w)
            .unwrap();
        assert_eq!(got.x_rate, 50_000);
        assert_eq!(gate.clamped(), 1);
        // Unauthenticated sessions keep plain vetting.
        let mut open = ReportGate::new(None, 0.0);
        assert_eq!(open.vet(&sealed, t(6), src, 1.0, w), Err(Refused::Auth));
        assert_eq!(
            open.vet(&plain.to_bytes(), t(6), src, 1.0, w)
                .map(|r| r.rid),
            Ok(9)
        );
    }
}
