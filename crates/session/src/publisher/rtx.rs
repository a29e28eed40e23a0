//! Retransmission of lost video packets to the receiver that asks for them
//! (docs/protocols/retransmission.md).
//!
//! The sender keeps each layer's media packets, sealed as they went out, for
//! [`RtxConfig::history`]. A retransmission request (`proto::wire::request`, kind 3) names a
//! stream's SSRC and sequence numbers; each one still kept goes again, unchanged, by unicast to
//! the address the request came from. The receiver opens it like the original (same seal,
//! same sequence number) and its replay window drops whatever arrives twice.
//!
//! Unicast repair costs the sender per receiver, and a request is a small datagram that asks
//! for many large ones: each requesting address gets a token bucket of
//! [`RtxConfig::share`] of the cumulative rate up to the layer it asks about (a receiver that
//! lost that layer holds it, so this is a share of what its path already carries), and all
//! retransmissions together stay under [`RtxConfig::max_bps`]. What does not fit is counted
//! and not sent: the receiver's key-picture request is the fallback.
//!
//! Retransmissions to one requester are spaced at its own stream's packet interval (the
//! cumulative rate up to the layer asked about): a requester behind a small queue at the edge
//! of its capacity lost four times as many packets when a request's packets went back to back
//! (docs/protocols/retransmission.md, "Spacing").

use proto::{SessionInfo, Time};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

/// How retransmission is bounded.
#[derive(Clone, Debug, PartialEq)]
pub struct RtxConfig {
    /// How long a sent media packet is kept for retransmission.
    pub history: Duration,
    /// Each requester's budget: this share of the cumulative rate of layers 0..=k, where k is
    /// the layer of the packet it asks for.
    pub share: f64,
    /// Each requester's burst: this many packets at once.
    pub burst_packets: u32,
    /// All retransmissions together, bit/s.
    pub max_bps: u64,
    /// Requesters tracked at once; a new one is refused while the table is full of requesters
    /// active in the last [`REQUESTER_IDLE`].
    pub max_requesters: usize,
}

impl Default for RtxConfig {
    fn default() -> Self {
        RtxConfig {
            history: Duration::from_secs(1),
            share: 0.10,
            burst_packets: 16,
            max_bps: 50_000_000,
            max_requesters: 4096,
        }
    }
}

/// A requester silent this long gives its table entry up to a new one.
pub const REQUESTER_IDLE: Duration = Duration::from_secs(10);
/// Packets kept per layer at most, whatever the history's duration.
const MAX_KEPT: usize = 4096;
/// Retransmissions waiting to be sent at most.
const MAX_QUEUED: usize = 1024;

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtxStats {
    /// Retransmission requests accepted (authenticated, this session).
    pub requests: u64,
    /// Sequence numbers asked for.
    pub asked: u64,
    /// Packets sent again, and their bytes.
    pub sent: u64,
    pub sent_bytes: u64,
    /// Asked for but no longer (or never) kept: padding, repair, too old, unknown SSRC.
    pub not_kept: u64,
    /// Kept but over the requester's or the session's budget.
    pub over_budget: u64,
    /// Requests refused because the requester table was full.
    pub table_full: u64,
}

struct Kept {
    at: Time,
    /// The layer's extended sequence number (kept in increasing order).
    ext: u64,
    bytes: Vec<u8>,
}

#[derive(Clone, Copy)]
struct Bucket {
    bytes: f64,
    last: Time,
    /// A requester's next retransmission goes no sooner than this.
    next_free: Time,
}

impl Bucket {
    fn full(cap: f64, now: Time) -> Bucket {
        Bucket {
            bytes: cap,
            last: now,
            next_free: now,
        }
    }

    fn refill(&mut self, now: Time, rate_bytes_s: f64, cap: f64) {
        let dt = now.saturating_since(self.last).as_secs_f64();
        self.bytes = (self.bytes + dt * rate_bytes_s).min(cap);
        self.last = self.last.max(now);
    }
}

/// The retransmission state of one layered session.
pub struct Retransmitter {
    cfg: RtxConfig,
    kept: Vec<VecDeque<Kept>>,
    /// Cumulative announced rate of layers 0..=k, bit/s.
    cum_bps: Vec<f64>,
    packet_size: f64,
    requesters: HashMap<SocketAddr, Bucket>,
    global: Bucket,
    /// (requester, packet, not before), in the order asked.
    queue: VecDeque<(SocketAddr, Vec<u8>, Time)>,
    spare: Vec<Vec<u8>>,
    stats: RtxStats,
}

impl Retransmitter {
    pub fn new(cfg: RtxConfig, info: &SessionInfo) -> Retransmitter {
        let n = info.layers.len();
        let packet_size = f64::from(info.packet_size.max(1));
        let global_cap = packet_size * f64::from(cfg.burst_packets.max(1)) * 4.0;
        Retransmitter {
            kept: (0..n).map(|_| VecDeque::new()).collect(),
            cum_bps: (0..n).map(|k| info.cumulative_rate(k)).collect(),
            packet_size,
            requesters: HashMap::new(),
            global: Bucket::full(global_cap, Time::ZERO),
            queue: VecDeque::new(),
            spare: Vec::new(),
            stats: RtxStats::default(),
            cfg,
        }
    }

    pub fn stats(&self) -> RtxStats {
        self.stats
    }

    /// A media packet of layer `layer` with extended sequence number `ext` (increasing) went
    /// out at `now` as `bytes` (sealed, as sent).
    pub fn sent(&mut self, now: Time, layer: usize, ext: u64, bytes: &[u8]) {
        let Some(q) = self.kept.get_mut(layer) else {
            return;
        };
        while q.len() >= MAX_KEPT
            || q.front()
                .is_some_and(|k| now.saturating_since(k.at) > self.cfg.history)
        {
            if let Some(old) = q.pop_front() {
                self.spare.push(old.bytes);
            }
        }
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(bytes);
        q.push_back(Kept {
            at: now,
            ext,
            bytes: b,
        });
    }

    /// `from` asks for sequence numbers `seqs` of layer `layer`'s stream.
    pub fn request(&mut self, now: Time, from: SocketAddr, layer: usize, seqs: &[u16]) {
        self.stats.asked += seqs.len() as u64;
        let Some(&cum) = self.cum_bps.get(layer) else {
            self.stats.not_kept += seqs.len() as u64;
            return;
        };
        if !self.requesters.contains_key(&from) && self.requesters.len() >= self.cfg.max_requesters
        {
            self.requesters
                .retain(|_, b| now.saturating_since(b.last) < REQUESTER_IDLE);
            if self.requesters.len() >= self.cfg.max_requesters {
                self.stats.table_full += 1;
                return;
            }
        }
        self.stats.requests += 1;
        let cap = self.packet_size * f64::from(self.cfg.burst_packets.max(1));
        let rate = self.cfg.share * cum / 8.0;
        let bucket = self
            .requesters
            .entry(from)
            .or_insert_with(|| Bucket::full(cap, now));
        bucket.refill(now, rate, cap);
        let global_cap = cap * 4.0;
        self.global
            .refill(now, self.cfg.max_bps as f64 / 8.0, global_cap);
        let history = self.cfg.history;
        let gap = Duration::from_secs_f64(self.packet_size * 8.0 / cum.max(1.0));
        let q = &self.kept[layer];
        for &seq in seqs {
            // The newest kept packet with this 16-bit number: its extended number is the
            // newest one's less their distance in 16-bit space, found by binary search (a
            // forged request must not cost the media thread a scan per number).
            let kept = q.back().and_then(|last| {
                let ext = last
                    .ext
                    .checked_sub(u64::from((last.ext as u16).wrapping_sub(seq)))?;
                let i = q.binary_search_by_key(&ext, |k| k.ext).ok()?;
                q.get(i)
            });
            let Some(k) = kept.filter(|k| now.saturating_since(k.at) <= history) else {
                self.stats.not_kept += 1;
                continue;
            };
            let len = k.bytes.len() as f64;
            if bucket.bytes < len || self.global.bytes < len || self.queue.len() >= MAX_QUEUED {
                self.stats.over_budget += 1;
                continue;
            }
            bucket.bytes -= len;
            self.global.bytes -= len;
            let at = bucket.next_free.max(now);
            bucket.next_free = at + gap;
            self.queue.push_back((from, k.bytes.clone(), at));
        }
    }

    /// When the next retransmission is due, if one waits.
    pub fn next_due(&self) -> Option<Time> {
        self.queue.iter().map(|e| e.2).min()
    }

    /// The next retransmission due at `now`: where it goes and its bytes.
    pub fn poll(&mut self, now: Time) -> Option<(SocketAddr, Vec<u8>)> {
        let i = self.queue.iter().position(|e| e.2 <= now)?;
        let (to, b, _) = self.queue.remove(i)?;
        self.stats.sent += 1;
        self.stats.sent_bytes += b.len() as u64;
        Some((to, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn info() -> SessionInfo {
        // 3 layers of 100 kbit/s each, 500-byte packets.
        let mut i = SessionInfo::equal_layers(3, 100_000, Ipv4Addr::new(239, 1, 1, 1), 5000);
        i.packet_size = 500;
        i
    }

    fn addr(n: u8) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, n)), 4000)
    }

    #[test]
    fn kept_packets_go_again_unchanged_within_the_requesters_budget() {
        let mut r = Retransmitter::new(RtxConfig::default(), &info());
        for s in 0..100u16 {
            r.sent(
                Time::from_millis(u64::from(s) * 10),
                0,
                u64::from(s),
                &[s as u8; 500],
            );
        }
        let now = Time::from_millis(1050);
        r.request(now, addr(1), 0, &[95, 96, 7000]);
        let (to, b) = r.poll(Time::NEVER).unwrap();
        assert_eq!((to, b), (addr(1), vec![95; 500]));
        assert_eq!(r.poll(Time::NEVER).unwrap().1, vec![96; 500]);
        assert!(r.poll(Time::NEVER).is_none());
        // Packet 0 (sent at 0 ms) is older than the history; 7000 was never sent.
        r.request(now, addr(1), 0, &[0]);
        assert!(r.poll(Time::NEVER).is_none());
        let s = r.stats();
        assert_eq!((s.asked, s.sent, s.not_kept), (4, 2, 2));
        // A burst of 16 packets, then the share of layer 0's 100 kbit/s: 10 kbit/s, 2.5
        // packets a second. 30 more asked at once: 14 fit what is left of the burst.
        let many: Vec<u16> = (80..100).chain(80..90).collect();
        r.request(now, addr(1), 0, &many);
        let mut n = 0;
        while r.poll(Time::NEVER).is_some() {
            n += 1;
        }
        assert_eq!(n, 14);
        assert_eq!(r.stats().over_budget, 16);
        // Another requester has a budget of its own; after 2 s the first has 5 packets more.
        r.request(now, addr(2), 0, &[99]);
        assert!(r.poll(Time::NEVER).is_some());
        let later = Time::from_millis(3050);
        for s in 100..300u16 {
            r.sent(later, 0, u64::from(s), &[1; 500]);
        }
        r.request(later, addr(1), 0, &(200..220).collect::<Vec<_>>());
        let mut n = 0;
        while r.poll(Time::NEVER).is_some() {
            n += 1;
        }
        assert_eq!(n, 5);
    }

    #[test]
    fn sixteen_bit_numbers_find_their_packet_across_the_wrap() {
        let mut r = Retransmitter::new(RtxConfig::default(), &info());
        // Extended numbers 65530..65545: the wire numbers wrap from 65535 to 0 (20, never
        // sent, is not found).
        for e in 65_530..65_546u64 {
            r.sent(Time::from_millis(e - 65_000), 1, e, &[(e % 251) as u8; 500]);
        }
        let now = Time::from_millis(600);
        r.request(now, addr(1), 1, &[65_534, 3, 20]);
        let got: Vec<u8> = std::iter::from_fn(|| r.poll(Time::NEVER))
            .map(|(_, b)| b[0])
            .collect();
        assert_eq!(got, vec![(65_534 % 251) as u8, (65_539 % 251) as u8]);
        assert_eq!(r.stats().not_kept, 1);
    }

    /// One requester's retransmissions go at its stream's packet interval (layer 0: 100
    /// kbit/s of 500-byte packets, 40 ms), another requester's are not held back by them.
    #[test]
    fn one_requesters_retransmissions_are_spaced() {
        let mut r = Retransmitter::new(RtxConfig::default(), &info());
        for s in 0..10u64 {
            r.sent(Time::from_millis(s), 0, s, &[s as u8; 500]);
        }
        let t0 = Time::from_millis(100);
        r.request(t0, addr(1), 0, &[1, 2, 3]);
        r.request(t0, addr(2), 0, &[4]);
        let take = |r: &mut Retransmitter, ms: u64| -> Vec<(u8, u8)> {
            std::iter::from_fn(|| r.poll(Time::from_millis(ms)))
                .map(|(a, b)| (a.to_string().as_bytes()[7] - b'0', b[0]))
                .collect()
        };
        assert_eq!(take(&mut r, 100), vec![(1, 1), (2, 4)]);
        assert_eq!(r.next_due(), Some(Time::from_millis(140)));
        assert!(take(&mut r, 139).is_empty());
        assert_eq!(take(&mut r, 140), vec![(1, 2)]);
        assert_eq!(take(&mut r, 180), vec![(1, 3)]);
        assert_eq!(r.next_due(), None);
    }

    #[test]
    fn the_requester_table_is_bounded() {
        let cfg = RtxConfig {
            max_requesters: 2,
            ..RtxConfig::default()
        };
        let mut r = Retransmitter::new(cfg, &info());
        r.sent(Time::ZERO, 2, 1, &[0; 500]);
        for n in 1..=3 {
            r.request(Time::from_millis(10), addr(n), 2, &[1]);
        }
        assert_eq!(r.stats().table_full, 1);
        // Idle requesters give their place up.
        r.request(Time::from_millis(20_000), addr(3), 2, &[1]);
        assert_eq!(r.stats().table_full, 1);
        // A layer the session does not have: nothing kept.
        r.request(Time::from_millis(20_000), addr(3), 9, &[1]);
        assert_eq!(r.stats().not_kept, 2);
    }
}
