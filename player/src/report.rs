//! The player's side of the UDP report channel (`docs/protocols/reports.md`): telemetry in one
//! datagram tagged with this viewer's report key, spaced as RTCP members space their reports
//! (RFC 3550 §6.2-6.3) so that all viewers together stay within the server's report budget
//! whatever the audience size. The server's acknowledgements (authenticated with the same key)
//! tell the audience size and the budget. HTTP telemetry remains the fallback: before the first
//! key, for a report too large for one datagram, and when the socket fails.

use security::auth::ReceiverKey;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

const MAGIC: &[u8; 4] = b"LCR1";
const ACK_MAGIC: &[u8; 4] = b"LCA1";
const TAG_LEN: usize = 16;
/// Largest report the server takes.
pub const MAX_REPORT: usize = 1400;
/// IPv4 + UDP headers, counted in the report size as RTCP counts lower-layer headers.
const HEADERS: f64 = 28.0;
/// Shortest spacing of two reports (RFC 3550 uses 5 s; a dashboard wants about 1 s while the
/// audience is small).
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Longest spacing, whatever the audience (a viewer must not be taken for gone for long; the
/// server's viewer timeout is raised to several intervals by its operator for big events).
pub const MAX_INTERVAL: Duration = Duration::from_secs(300);

/// The deterministic RTCP interval (RFC 3550 §6.3.1 without the randomisation): `n` reporters
/// sharing `budget_bps` with reports of `avg_bytes` each, at least [`MIN_INTERVAL`].
pub fn interval(n: u32, avg_bytes: f64, budget_bps: f64) -> Duration {
    let t = if budget_bps > 0.0 {
        f64::from(n.max(1)) * avg_bytes * 8.0 / budget_bps
    } else {
        MAX_INTERVAL.as_secs_f64()
    };
    Duration::from_secs_f64(t.clamp(MIN_INTERVAL.as_secs_f64(), MAX_INTERVAL.as_secs_f64()))
}

/// The interval randomised over [0.5, 1.5] × `t` and divided by e − 3/2, as RFC 3550 §6.3.1
/// does so that reports do not synchronise and the mean rate stays the budget (`u` in [0, 1)).
pub fn randomised(t: Duration, u: f64) -> Duration {
    t.mul_f64((0.5 + u.clamp(0.0, 1.0)) / (std::f64::consts::E - 1.5))
}

/// Sends this viewer's reports.
pub struct ReportSender {
    sock: UdpSocket,
    key: ReceiverKey,
    session: String,
    start: Instant,
    next: Option<Instant>,
    last_ts: u32,
    /// From the last acknowledgement.
    pub audience: u32,
    /// From the last acknowledgement; `None` before the first, when the report goes at the
    /// floor's pace (`MIN_INTERVAL`).
    pub budget_bps: Option<f64>,
    avg_bytes: f64,
    rng: u64,
    pub sent: u64,
    pub acks: u64,
}

impl ReportSender {
    /// A sender to `server` for `session` with `key` (the key API's `telemetry_key`).
    pub fn new(server: SocketAddr, key: ReceiverKey, session: &str) -> std::io::Result<Self> {
        let sock = UdpSocket::bind(if server.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        })?;
        sock.connect(server)?;
        sock.set_nonblocking(true)?;
        let seed = key.rid() as u64 ^ 0x9e37_79b9_7f4a_7c15;
        Ok(ReportSender {
            sock,
            key,
            session: session.to_string(),
            start: Instant::now(),
            next: None,
            last_ts: 0,
            audience: 1,
            budget_bps: None,
            avg_bytes: 300.0,
            rng: seed,
            sent: 0,
            acks: 0,
        })
    }

    fn uniform(&mut self) -> f64 {
        // xorshift64*: spreading report times needs no cryptographic quality.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether a report is due now.
    pub fn due(&self, now: Instant) -> bool {
        self.next.is_none_or(|t| now >= t)
    }

    /// Encodes one report (`key_request`: ask for a key picture too).
    pub fn encode(&mut self, json: &[u8], key_request: bool, now: Instant) -> Option<Vec<u8>> {
        // Microseconds since start, strictly increasing (the server's replay order).
        let ts = (now.duration_since(self.start).as_micros() as u32).max(self.last_ts + 1);
        self.last_ts = ts;
        let s = self.session.as_bytes();
        let mut b = Vec::with_capacity(15 + s.len() + json.len() + TAG_LEN);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&[u8::from(key_request), 0]);
        b.extend_from_slice(&self.key.rid().to_be_bytes());
        b.extend_from_slice(&ts.to_be_bytes());
        b.push(u8::try_from(s.len()).ok()?);
        b.extend_from_slice(s);
        b.extend_from_slice(json);
        let tag = self.key.tag(&b);
        b.extend_from_slice(&tag);
        (b.len() <= MAX_REPORT).then_some(b)
    }

    /// Sends `json` now and schedules the next report. `Err` when it cannot go as a datagram
    /// (too large, socket error): the caller posts it over HTTP instead.
    pub fn send(&mut self, json: &[u8], now: Instant) -> std::io::Result<()> {
        let b = self
            .encode(json, false, now)
            .ok_or_else(|| std::io::Error::other("report larger than one datagram"))?;
        self.sock.send(&b)?;
        self.sent += 1;
        self.avg_bytes += (b.len() as f64 + HEADERS - self.avg_bytes) / 16.0;
        let t = self
            .budget_bps
            .map_or(MIN_INTERVAL, |b| interval(self.audience, self.avg_bytes, b));
        let u = self.uniform();
        self.next = Some(now + randomised(t, u));
        Ok(())
    }

    /// Reads the acknowledgements that arrived; updates the audience size and the budget from
    /// the authentic ones.
    pub fn poll_acks(&mut self) {
        let mut buf = [0u8; 64];
        while let Ok(n) = self.sock.recv(&mut buf) {
            if let Some((audience, budget)) = self.parse_ack(&buf[..n]) {
                self.audience = audience;
                self.budget_bps = Some(f64::from(budget));
                self.acks += 1;
            }
        }
    }

    /// `(audience, budget_bps)` of an authentic acknowledgement.
    pub fn parse_ack(&self, b: &[u8]) -> Option<(u32, u32)> {
        if b.len() != 16 + TAG_LEN || &b[..4] != ACK_MAGIC {
            return None;
        }
        let (msg, tag) = b.split_at(16);
        let want = self.key.tag(msg);
        let ok = want.iter().zip(tag).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0;
        ok.then(|| {
            (
                u32::from_be_bytes(msg[8..12].try_into().unwrap_or_default()),
                u32::from_be_bytes(msg[12..16].try_into().unwrap_or_default()),
            )
        })
    }
}

/// The sender for a session's report channel (`telemetry` from the key API): to the
/// session's feedback port on the host the key API names (the SAM's sender), else on the host
/// of the session URL; `None` without a key or a session name.
pub fn sender_for(
    a: &crate::Args,
    telemetry: Option<crate::auth::ReportChannel>,
) -> Option<ReportSender> {
    let c = telemetry?;
    let ip: std::net::IpAddr = match c.host {
        Some(h) => h,
        None => {
            let (host, _) = crate::http_client::split_url(a.session_url.as_deref()?).ok()?;
            match host.rsplit_once(':') {
                Some((h, _)) => h.trim_matches(['[', ']']).parse().ok()?,
                None => host.parse().ok()?,
            }
        }
    };
    ReportSender::new(
        SocketAddr::new(ip, c.port),
        c.key,
        a.session_name.as_deref()?,
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The total report rate of n viewers stays within the budget whatever n (RFC 3550 §6.2),
    /// with the 1-s floor while the audience is small.
    #[test]
    fn total_rate_stays_within_the_budget() {
        let budget = 2_000_000.0;
        let size = 400.0;
        for n in [1u32, 10, 100, 1_000, 10_000, 100_000] {
            let t = interval(n, size, budget).as_secs_f64();
            let total_bps = f64::from(n) * size * 8.0 / t;
            assert!(
                total_bps <= budget * 1.0001 || t >= MAX_INTERVAL.as_secs_f64(),
                "n {n}"
            );
            if n <= 100 {
                assert_eq!(t, 1.0, "n {n}");
            }
        }
        assert_eq!(interval(10_000, 400.0, 2e6), Duration::from_secs(16));
        // The randomised mean over [0.5, 1.5] is t / (e - 3/2).
        let t = Duration::from_secs(10);
        let mean: f64 = (0..1000)
            .map(|i| randomised(t, i as f64 / 1000.0).as_secs_f64())
            .sum::<f64>()
            / 1000.0;
        assert!(
            (mean - 10.0 / (std::f64::consts::E - 1.5)).abs() < 0.01,
            "{mean}"
        );
    }

    /// Reports carry a strictly increasing timestamp and verify under the key; forged
    /// acknowledgements are ignored; an oversized report is refused (HTTP takes it).
    #[test]
    fn reports_and_acks_round_trip() {
        let srv = UdpSocket::bind("127.0.0.1:0").unwrap();
        let key = ReceiverKey::from_hex(9, &"42".repeat(32)).unwrap();
        let mut r = ReportSender::new(srv.local_addr().unwrap(), key.clone(), "one").unwrap();
        let now = Instant::now();
        let a = r.encode(b"{}", false, now).unwrap();
        let b = r.encode(b"{}", true, now).unwrap();
        let ts = |x: &[u8]| u32::from_be_bytes(x[10..14].try_into().unwrap());
        assert!(ts(&b) > ts(&a));
        assert_eq!(b[4], 1);
        let (msg, tag) = a.split_at(a.len() - TAG_LEN);
        assert_eq!(key.tag(msg), tag);
        assert!(r.encode(&vec![b' '; MAX_REPORT], false, now).is_none());
        let mut ack = ACK_MAGIC.to_vec();
        ack.extend_from_slice(&[0, 0, 0, 1]);
        ack.extend_from_slice(&5000u32.to_be_bytes());
        ack.extend_from_slice(&1_000_000u32.to_be_bytes());
        let good = [ack.clone(), key.tag(&ack).to_vec()].concat();
        assert_eq!(r.parse_ack(&good), Some((5000, 1_000_000)));
        let mut forged = good.clone();
        forged[10] ^= 1;
        assert_eq!(r.parse_ack(&forged), None);
        r.send(b"{}", now).unwrap();
        assert!(!r.due(now));
        let mut buf = [0u8; 2048];
        let n = srv.recv(&mut buf).unwrap();
        assert_eq!(&buf[..4], MAGIC);
        assert!(n > 15 + TAG_LEN);
    }

    /// Before the first acknowledgement the player knows neither the audience nor the budget:
    /// its next report comes at the floor's pace, not the 300-s maximum (which read an unknown
    /// budget as none, so a viewer sent one report and was taken for gone by the server).
    #[test]
    fn the_report_after_the_first_comes_at_the_floor_until_an_ack_says_otherwise() {
        let srv = UdpSocket::bind("127.0.0.1:0").unwrap();
        let key = ReceiverKey::from_hex(9, &"42".repeat(32)).unwrap();
        let mut r = ReportSender::new(srv.local_addr().unwrap(), key, "one").unwrap();
        let now = Instant::now();
        r.send(b"{}", now).unwrap();
        let ceiling = randomised(MIN_INTERVAL, 1.0);
        assert!(r.due(now + ceiling), "next report not within {ceiling:?}");
        // An acknowledgement naming a large audience on a small budget spaces them out.
        r.audience = 100_000;
        r.budget_bps = Some(1_000_000.0);
        let later = now + ceiling;
        r.send(b"{}", later).unwrap();
        assert!(!r.due(later + ceiling));
    }
}
