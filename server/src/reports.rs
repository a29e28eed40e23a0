//! Viewer reports over UDP (`docs/protocols/reports.md`): telemetry and key requests in one
//! authenticated datagram, so that a large audience costs the server datagrams, not TCP and
//! TLS connections. Reports come to the session's feedback port, the one socket per session
//! that also takes TFMCC reports and media requests: its media thread hands every datagram
//! that starts with [`MAGIC`] to this task over a bounded queue (a full queue is a counted
//! drop) and the Publisher the rest, and acknowledgements leave by the same socket. Vetting
//! runs cheapest first: a per-source token bucket (bounded table),
//! the header, the session, the MAC under the viewer's report key (per session secret, per
//! receiver id, as the TFMCC report keys), the per-receiver timestamp order, then the JSON.
//! Accepted telemetry goes to the viewer actor; key requests are coalesced per session under
//! a rate limit before they reach the encoder. Each accepted report is answered with an
//! authenticated acknowledgement carrying the audience size and the report budget, from which
//! players space their reports as RTCP members do (RFC 3550 §6.2-6.3).

use crate::api::App;
use crate::viewers::Telemetry;
use proto::Time;
use security::auth::{InfluenceConfig, InfluenceLimiter};
use std::collections::HashMap;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;
use tokio::sync::mpsc::{Receiver, Sender};

/// First bytes of a report and of its acknowledgement.
pub const MAGIC: &[u8; 4] = b"LCR1";
pub const ACK_MAGIC: &[u8; 4] = b"LCA1";
/// Tag length (HMAC-SHA256 truncated, as the TFMCC reports).
pub const TAG_LEN: usize = 16;
/// Flag: the viewer asks for a key picture; with `FLAG_SYNC` a re-sync of `spatial`.
pub const FLAG_KEY: u8 = 1;
pub const FLAG_SYNC: u8 = 2;
/// Largest report accepted (one unfragmented datagram on any LAN).
pub const MAX_REPORT: usize = 1400;
/// At most one key request per session is passed to the encoder in this time; the others
/// are counted as coalesced (the encoder's next key picture serves them all).
pub const KEY_REQUEST_SPACING: Duration = Duration::from_millis(500);

/// The parts of a report.
#[derive(Debug, PartialEq)]
pub struct Report<'a> {
    pub flags: u8,
    pub spatial: u8,
    pub rid: u32,
    pub ts_us: u32,
    pub session: &'a str,
    pub json: &'a [u8],
    /// The bytes the tag covers, and the tag.
    pub signed: &'a [u8],
    pub tag: &'a [u8],
}

/// Parses a report: `MAGIC | flags u8 | spatial u8 | rid u32 | ts_us u32 | len u8 | session id
/// | telemetry JSON | tag(16)`, big-endian. `None` if it is not one.
pub fn parse(b: &[u8]) -> Option<Report<'_>> {
    if b.len() > MAX_REPORT || b.len() < 15 + TAG_LEN || &b[..4] != MAGIC {
        return None;
    }
    let (signed, tag) = b.split_at(b.len() - TAG_LEN);
    let n = signed[14] as usize;
    let session = std::str::from_utf8(signed.get(15..15 + n)?).ok()?;
    Some(Report {
        flags: signed[4],
        spatial: signed[5],
        rid: u32::from_be_bytes(signed[6..10].try_into().ok()?),
        ts_us: u32::from_be_bytes(signed[10..14].try_into().ok()?),
        session,
        json: &signed[15 + n..],
        signed,
        tag,
    })
}

/// Reports the media threads may queue for this task before they drop (about 1.4 MB).
pub const QUEUE: usize = 1024;

/// A datagram that looked like a report, as the media thread of `session` read it.
#[derive(Debug)]
pub struct Inbound {
    pub session: std::sync::Arc<str>,
    pub from: SocketAddr,
    pub bytes: Vec<u8>,
}

/// Hands a datagram read on `session`'s feedback socket to the report task; `false` (the
/// caller counts it) when the queue is full or the task is gone.
pub fn offer(
    tx: &Sender<Inbound>,
    session: &std::sync::Arc<str>,
    from: SocketAddr,
    b: &[u8],
) -> bool {
    tx.try_send(Inbound {
        session: session.clone(),
        from,
        bytes: b.to_vec(),
    })
    .is_ok()
}

/// Counters of the report channel (`layercast_reports_total{result}` and
/// `layercast_key_requests_total{result}`).
#[derive(Debug, Default)]
pub struct Counters {
    pub accepted: AtomicU64,
    pub malformed: AtomicU64,
    pub rate_limited: AtomicU64,
    pub unknown_session: AtomicU64,
    pub auth_failed: AtomicU64,
    pub replayed: AtomicU64,
    pub bad_telemetry: AtomicU64,
    /// Telemetry naming another viewer than the token its report key was issued on.
    pub wrong_viewer: AtomicU64,
    pub keys_forwarded: AtomicU64,
    pub keys_coalesced: AtomicU64,
    /// Live viewers at the last tick (the audience size in acknowledgements).
    pub audience: AtomicU64,
}

/// Appends the report families to a Prometheus exposition.
pub fn metrics(c: &Counters, m: &mut String) {
    m.push_str("# TYPE layercast_reports_total counter\n");
    for (r, v) in [
        ("accepted", &c.accepted),
        ("malformed", &c.malformed),
        ("rate_limited", &c.rate_limited),
        ("unknown_session", &c.unknown_session),
        ("auth_failed", &c.auth_failed),
        ("replayed", &c.replayed),
        ("bad_telemetry", &c.bad_telemetry),
        ("wrong_viewer", &c.wrong_viewer),
    ] {
        let _ = writeln!(
            m,
            "layercast_reports_total{{result=\"{r}\"}} {}",
            v.load(Ordering::Relaxed)
        );
    }
    m.push_str("# TYPE layercast_key_requests_total counter\n");
    for (r, v) in [
        ("forwarded", &c.keys_forwarded),
        ("coalesced", &c.keys_coalesced),
    ] {
        let _ = writeln!(
            m,
            "layercast_key_requests_total{{result=\"{r}\"}} {}",
            v.load(Ordering::Relaxed)
        );
    }
}

/// Vets the reports the sessions' media threads queue until every sender is gone or the
/// runtime stops. `budget_bps` is announced to players.
pub async fn run(mut rx: Receiver<Inbound>, app: App, budget_bps: u32) {
    let epoch = Instant::now();
    let mut limiter = InfluenceLimiter::new(InfluenceConfig {
        reports_per_sec: 4.0,
        burst: 8.0,
        // Receiver ids are per viewer: room for a large audience (about 100 bytes each).
        max_entries: 65_536,
        ..InfluenceConfig::default()
    });
    let mut last_key: HashMap<String, Instant> = HashMap::new();
    let c = &app.state.reports;
    while let Some(m) = rx.recv().await {
        let src = m.from;
        let now = Time(epoch.elapsed().as_nanos() as u64);
        if limiter.admit(now, src.ip()).is_err() {
            c.rate_limited.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let Some(r) = parse(&m.bytes) else {
            c.malformed.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        // A report names the session whose feedback port it came to.
        let s = match app.state.session(r.session) {
            Some(s) if r.session == &*m.session => Some(s),
            _ => None,
        };
        let Some(s) = s else {
            c.unknown_session.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let key = s.telemetry_mac.receiver_key(r.rid);
        if !bool::from(key.tag(r.signed).ct_eq(r.tag)) {
            c.auth_failed.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if limiter.check_fresh(now, r.rid, r.ts_us).is_err() {
            c.replayed.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if !r.json.is_empty() {
            match serde_json::from_slice::<Telemetry>(r.json) {
                Ok(t) if !s.rid_may_report_as(r.rid, &t.viewer_id) => {
                    c.wrong_viewer.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Ok(t) if t.session_id == r.session => {
                    let addr = src.to_string();
                    if crate::api::accept_telemetry(&app, t, addr, false)
                        .await
                        .is_err()
                    {
                        c.bad_telemetry.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
                _ => {
                    c.bad_telemetry.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
        }
        if r.flags & (FLAG_KEY | FLAG_SYNC) != 0 {
            let t = Instant::now();
            let due = last_key
                .get(r.session)
                .is_none_or(|l| t.duration_since(*l) >= KEY_REQUEST_SPACING);
            if due && last_key.len() < 4096 {
                last_key.insert(r.session.to_string(), t);
                let spatial = (r.flags & FLAG_SYNC != 0).then_some(r.spatial);
                if crate::keyreq::request(&s, spatial).is_ok() {
                    c.keys_forwarded.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                c.keys_coalesced.fetch_add(1, Ordering::Relaxed);
            }
        }
        c.accepted.fetch_add(1, Ordering::Relaxed);
        let mut ack = Vec::with_capacity(4 + 8 + 4 + TAG_LEN);
        ack.extend_from_slice(ACK_MAGIC);
        ack.extend_from_slice(&r.ts_us.to_be_bytes());
        let audience = c.audience.load(Ordering::Relaxed).min(u64::from(u32::MAX)) as u32;
        ack.extend_from_slice(&audience.to_be_bytes());
        ack.extend_from_slice(&budget_bps.to_be_bytes());
        let tag = key.tag(&ack);
        ack.extend_from_slice(&tag);
        if let Some(sock) = &s.feedback_reply {
            // Non-blocking: a full send buffer loses an acknowledgement, which the player
            // survives (it keeps its last interval).
            let _ = sock.send_to(&ack, src);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_parse_and_refuse_garbage() {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[FLAG_KEY, 0]);
        b.extend_from_slice(&7u32.to_be_bytes());
        b.extend_from_slice(&99u32.to_be_bytes());
        b.push(3);
        b.extend_from_slice(b"one{}");
        b.extend_from_slice(&[0xAA; TAG_LEN]);
        let r = parse(&b).unwrap();
        assert_eq!(
            (r.flags, r.rid, r.ts_us, r.session),
            (FLAG_KEY, 7, 99, "one")
        );
        assert_eq!(r.json, b"{}");
        assert_eq!(r.tag, &[0xAA; TAG_LEN]);
        // A session length past the end, a wrong magic, too short, too long: not reports.
        let mut bad = b.clone();
        bad[14] = 200;
        assert!(parse(&bad).is_none());
        let mut bad = b.clone();
        bad[0] = b'X';
        assert!(parse(&bad).is_none());
        assert!(parse(&b[..20]).is_none());
        assert!(parse(&vec![b'L'; MAX_REPORT + 1]).is_none());
        for n in 0..b.len() {
            let _ = parse(&b[..n]);
        }
    }
}
