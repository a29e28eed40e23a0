//! In-process bed for the edge core in virtual time: a real libvpx source packetized per layer
//! (what the session's subscriber delivers), the edge, and browsers stood in for by str0m
//! peers (ICE, DTLS-SRTP, RTCP, TWCC feedback, NACK) behind `netmodel::Link` paths. Each
//! browser reassembles and decodes what it receives with libvpx, the way libwebrtc does: a
//! picture is decodable once its frames up to the marker arrived, in picture order; after a
//! picture it could not complete it waits for a key picture and sends a PLI.

#![allow(dead_code)]

use codec::vp9rtp::PayloadDescriptor;
use codec::vpx::Decoder;
use edge::{Edge, EdgeConfig, EdgeEvent, UpstreamPacket};
use netmodel::{Link, LinkConfig, LossModel};
use proto::Time;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use str0m::change::SdpAnswer;
use str0m::media::{Direction, KeyframeRequestKind, MediaKind, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};

pub const EDGE: &str = "10.0.0.1:4000";
pub const FRAME: Duration = Duration::from_micros(33_333);
/// The stand-in browser's jitter buffer. libwebrtc sizes its own from the measured jitter and,
/// with NACK, the time a retransmission takes; 100 ms covers a NACK round trip on the test
/// paths (20 ms RTT) plus the edge's and the stand-in's loss detection, which is what the
/// real browser's freeze counts (e2e edge suite) see.
pub const JITTER_BUFFER: Duration = Duration::from_millis(100);

/// One received video packet.
#[derive(Debug, Clone)]
pub struct Got {
    pub at: Duration,
    pub seq: u64,
    pub ts: u32,
    pub marker: bool,
    pub payload: Vec<u8>,
}

/// A decoded picture.
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    pub at: Duration,
    /// Its RTP timestamp (90 kHz).
    pub ts: u32,
    pub width: u32,
    pub height: u32,
    pub pid: u16,
}

pub struct Browser {
    pub rtc: Rtc,
    pub addr: SocketAddr,
    pub id: u64,
    pub video: Option<Mid>,
    pub connected: bool,
    pub timeout: Instant,
    /// Received video packets by extended sequence number, not yet assembled.
    pending: BTreeMap<u64, Got>,
    next_seq: Option<u64>,
    dec: Decoder,
    /// Waiting for a key picture after a picture it could not complete.
    broken: bool,
    last_pli: Option<Duration>,
    pub shown: Vec<Shown>,
    pub plis_sent: u64,
    pub packets: u64,
    pub audio_packets: u64,
    pub decode_errors: u64,
}

impl Browser {
    fn new(now: Instant, addr: SocketAddr) -> Browser {
        let mut rtc = Rtc::builder().set_rtp_mode(true).build(now);
        rtc.add_local_candidate(Candidate::host(addr, "udp").unwrap());
        Browser {
            rtc,
            addr,
            id: 0,
            video: None,
            connected: false,
            timeout: now,
            pending: BTreeMap::new(),
            next_seq: None,
            dec: Decoder::new(1).unwrap(),
            broken: true,
            last_pli: None,
            shown: Vec::new(),
            plis_sent: 0,
            packets: 0,
            audio_packets: 0,
            decode_errors: 0,
        }
    }

    /// Frames decoded per second over `[from, to)`.
    pub fn fps(&self, from: Duration, to: Duration) -> f64 {
        let n = self
            .shown
            .iter()
            .filter(|s| s.at >= from && s.at < to)
            .count();
        n as f64 / (to - from).as_secs_f64()
    }

    /// When each decoded picture is displayed: a browser shows pictures through a jitter
    /// buffer, here a fixed [`JITTER_BUFFER`] behind the RTP clock anchored at the first
    /// picture, or when decoded if later; never earlier than the one before.
    pub fn display_times(&self) -> Vec<Duration> {
        let Some(first) = self.shown.first() else {
            return Vec::new();
        };
        let mut last = Duration::ZERO;
        self.shown
            .iter()
            .map(|s| {
                let dts = s.ts.wrapping_sub(first.ts) as i32 as i64 * 1_000_000 / 90;
                let slot = (first.at + JITTER_BUFFER).as_nanos() as i64 + dts;
                let at = s.at.max(Duration::from_nanos(slot.max(0) as u64)).max(last);
                last = at;
                at
            })
            .collect()
    }

    /// Gaps between displayed pictures ([`Self::display_times`]) longer than `gap` in
    /// `[from, to)`, and the longest gap.
    pub fn freezes(&self, from: Duration, to: Duration, gap: Duration) -> (usize, Duration) {
        let t: Vec<Duration> = self
            .display_times()
            .into_iter()
            .filter(|&a| a >= from && a < to)
            .collect();
        let mut n = 0;
        let mut max = Duration::ZERO;
        for w in t.windows(2) {
            let g = w[1] - w[0];
            max = max.max(g);
            if g > gap {
                n += 1;
            }
        }
        (n, max)
    }

    /// Sizes of the pictures decoded in `[from, to)`.
    pub fn sizes(&self, from: Duration, to: Duration) -> Vec<(u32, u32)> {
        self.shown
            .iter()
            .filter(|s| s.at >= from && s.at < to)
            .map(|s| (s.width, s.height))
            .collect()
    }

    fn on_video(&mut self, g: Got) {
        self.packets += 1;
        if self.next_seq.is_none_or(|n| g.seq >= n) {
            self.pending.insert(g.seq, g);
        }
    }

    /// Assembles and decodes every complete picture at the head; after `giveup` without the
    /// head completing while later packets arrived, skips to the next key picture.
    fn assemble(&mut self, now: Duration, giveup: Duration) {
        loop {
            let Some((&first, p0)) = self.pending.iter().next() else {
                return;
            };
            if let Some(n) = self.next_seq {
                if first != n {
                    // A gap at the head: wait for the repair, then give up on the picture.
                    if now.saturating_sub(p0.at) < giveup {
                        return;
                    }
                    self.skip_to_key(now);
                    continue;
                }
            }
            // The picture starting at `first`: consecutive packets up to the marker.
            let mut end = None;
            for ((&s, p), expect) in self.pending.range(first..).zip(first..) {
                if s != expect {
                    break;
                }
                if p.marker {
                    end = Some(s);
                    break;
                }
            }
            let Some(end) = end else {
                if now.saturating_sub(p0.at) >= giveup && self.pending.len() > 1 {
                    self.skip_to_key(now);
                    continue;
                }
                return;
            };
            let pkts: Vec<Got> = (first..=end)
                .filter_map(|s| self.pending.remove(&s))
                .collect();
            self.next_seq = Some(end + 1);
            self.decode(now, &pkts);
        }
    }

    fn skip_to_key(&mut self, now: Duration) {
        // Drop the head picture and everything up to the next packet that starts a key
        // picture.
        let head = self.pending.keys().next().copied().unwrap_or(0);
        let key = self.pending.range(head + 1..).find(|(_, g)| {
            PayloadDescriptor::parse(&g.payload)
                .map(|(d, _)| d.start && !d.inter_picture && d.layer.is_some_and(|l| l.sid == 0))
                .unwrap_or(false)
        });
        let key = key.map(|(&s, _)| s);
        match key {
            Some(k) => {
                self.pending = self.pending.split_off(&k);
                self.next_seq = Some(k);
            }
            None => {
                if let Some((&last, _)) = self.pending.iter().next_back() {
                    self.next_seq = Some(last + 1);
                }
                self.pending.clear();
            }
        }
        self.broken = true;
        self.request_key(now);
    }

    fn request_key(&mut self, now: Duration) {
        if self
            .last_pli
            .is_some_and(|t| now < t + Duration::from_millis(500))
        {
            return;
        }
        let Some(mid) = self.video else { return };
        let mut api = self.rtc.direct_api();
        if let Some(rx) = api.stream_rx_by_mid(mid, None) {
            rx.request_keyframe(KeyframeRequestKind::Pli);
            self.plis_sent += 1;
            self.last_pli = Some(now);
        }
    }

    fn decode(&mut self, now: Duration, pkts: &[Got]) {
        let ts = pkts.first().map_or(0, |g| g.ts);
        let mut frames: Vec<Vec<u8>> = Vec::new();
        let mut key = false;
        let mut pid = 0;
        for g in pkts {
            let Ok((d, n)) = PayloadDescriptor::parse(&g.payload) else {
                self.decode_errors += 1;
                return;
            };
            if d.start {
                if frames.is_empty() && !d.inter_picture {
                    key = true;
                }
                frames.push(Vec::new());
            }
            pid = d.picture_id.unwrap_or(0);
            if let Some(f) = frames.last_mut() {
                f.extend_from_slice(&g.payload[n..]);
            }
        }
        if self.broken && !key {
            return;
        }
        let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        match self.dec.decode_layers(&refs) {
            Ok(Some(d)) => {
                self.broken = false;
                self.shown.push(Shown {
                    at: now,
                    ts,
                    width: d.width,
                    height: d.height,
                    pid,
                });
            }
            Ok(None) => {}
            Err(_) => {
                self.decode_errors += 1;
                self.broken = true;
            }
        }
    }
}

/// A path between the edge and one browser.
pub struct Path {
    pub down: Link<Vec<u8>>,
    pub up: Link<Vec<u8>>,
}

impl Path {
    pub fn new(rate_bps: u64, delay: Duration, loss: f64, seed: u64) -> Path {
        let mut d = LinkConfig::rate_delay(rate_bps, delay);
        if loss > 0.0 {
            d.loss = LossModel::Bernoulli { p: loss };
        }
        // 100 ms of queue at the bottleneck, like a tbf with latency 100ms.
        d.queue = Some(netmodel::QdiscConfig::Droptail {
            limit_packets: None,
            limit_bytes: Some((rate_bps / 8 / 10).max(8 * 1514)),
            limit_ms: None,
        });
        Path {
            down: Link::new(d, seed).unwrap(),
            up: Link::new(LinkConfig::rate_delay(0, delay), seed + 1).unwrap(),
        }
    }

    pub fn set_rate(&mut self, at: Time, rate_bps: u64) {
        let mut c = self.down.config().clone();
        c.rate_bps = rate_bps;
        c.queue = Some(netmodel::QdiscConfig::Droptail {
            limit_packets: None,
            limit_bytes: Some((rate_bps / 8 / 10).max(8 * 1514)),
            limit_ms: None,
        });
        self.down.reconfigure(at, c).unwrap();
    }
}

/// The whole bed.
/// A filter on the datagrams to browser `i` (true = drop), with the bed's time.
pub type DownDrop = Box<dyn FnMut(Duration, usize, &[u8]) -> bool>;

pub struct Bed {
    pub t0: Instant,
    pub now: Duration,
    pub edge: Edge,
    pub src: edge::source::Source,
    pub session: String,
    next_picture: Duration,
    /// Per-layer pacing: packets of a picture's layer k are spread over this share of the
    /// frame interval, the way the server's pacer spreads each layer at its rate.
    pub spread: f64,
    upstream: VecDeque<(Duration, usize, Vec<u8>)>,
    pub browsers: Vec<Browser>,
    pub paths: Vec<Path>,
    pub events: Vec<(Duration, EdgeEvent)>,
    pub key_requests: Vec<Duration>,
    pub upstream_drop: Box<dyn FnMut(usize, u64) -> bool>,
    /// Drops a datagram on its way to browser `i` before its path (true = drop).
    pub down_drop: DownDrop,
    pictures: u64,
}

impl Bed {
    pub fn new(conf: impl FnOnce(&mut EdgeConfig), src: edge::source::Source) -> Bed {
        let t0 = Instant::now();
        let mut c = EdgeConfig::new(EDGE.parse().unwrap());
        conf(&mut c);
        let mut edge = Edge::new(c);
        edge.set_session("live", src.session().clone()).unwrap();
        Bed {
            t0,
            now: Duration::ZERO,
            edge,
            src,
            session: "live".into(),
            next_picture: Duration::ZERO,
            spread: 0.8,
            upstream: VecDeque::new(),
            browsers: Vec::new(),
            paths: Vec::new(),
            events: Vec::new(),
            key_requests: Vec::new(),
            upstream_drop: Box::new(|_, _| false),
            down_drop: Box::new(|_, _, _| false),
            pictures: 0,
        }
    }

    pub fn at(&self) -> Instant {
        self.t0 + self.now
    }

    fn time(&self) -> Time {
        Time(self.now.as_nanos() as u64)
    }

    /// Adds a browser behind `path`; it makes its offer and takes the edge's answer (WHEP).
    pub fn add_browser(&mut self, path: Path) -> Result<usize, edge::Error> {
        let i = self.browsers.len();
        let addr: SocketAddr = format!("10.0.1.{}:5000", i + 2).parse().unwrap();
        let now = self.at();
        let mut b = Browser::new(now, addr);
        let mut api = b.rtc.sdp_api();
        let mid = api.add_media(MediaKind::Video, Direction::RecvOnly, None, None, None);
        api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
        let (offer, pending) = api.apply().unwrap();
        let (id, answer) = self
            .edge
            .add_viewer(now, &self.session, &offer.to_sdp_string())?;
        let answer = SdpAnswer::from_sdp_string(&answer).unwrap();
        b.rtc.sdp_api().accept_answer(pending, answer).unwrap();
        b.video = Some(mid);
        b.id = id;
        self.browsers.push(b);
        self.paths.push(path);
        self.drain_browser(i);
        Ok(i)
    }

    fn drain_browser(&mut self, i: usize) {
        let tnow = self.time();
        let b = &mut self.browsers[i];
        loop {
            match b.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    b.timeout = t;
                    break;
                }
                Ok(Output::Transmit(t)) => {
                    let len = t.contents.len() as u32;
                    let c: Vec<u8> = t.contents.into();
                    self.paths[i].up.arrive(tnow, c, len + 28, 0);
                }
                Ok(Output::Event(e)) => match e {
                    Event::Connected => b.connected = true,
                    Event::RtpPacket(p) => {
                        // The client offered Opus on PT 111 (str0m's default); all else is video.
                        if p.header.payload_type == 111.into() {
                            b.audio_packets += 1;
                        } else {
                            b.on_video(Got {
                                at: self.now,
                                seq: *p.seq_no,
                                ts: p.header.timestamp,
                                marker: p.header.marker,
                                payload: p.payload.to_vec(),
                            });
                        }
                    }
                    _ => {}
                },
                Err(e) => panic!("browser {i}: {e}"),
            }
        }
    }

    /// Runs until `until`, feeding pictures at the source rate.
    pub fn run(&mut self, until: Duration) {
        while self.now < until {
            // Upstream: the next picture's packets, layer by layer, spread as paced.
            while self.next_picture <= self.now {
                let p = self.src.next_picture().unwrap();
                let base = self.next_picture;
                for (k, pkts) in p.layers.into_iter().enumerate() {
                    let n = pkts.len().max(1) as u32;
                    for (j, b) in pkts.into_iter().enumerate() {
                        let off = FRAME.mul_f64(self.spread) * j as u32 / n;
                        self.upstream.push_back((base + off, k, b));
                    }
                }
                self.pictures += 1;
                self.next_picture += FRAME;
                let mut v: Vec<_> = self.upstream.drain(..).collect();
                v.sort_by_key(|x| x.0);
                self.upstream.extend(v);
            }
            while self.upstream.front().is_some_and(|x| x.0 <= self.now) {
                let (_, k, b) = self.upstream.pop_front().unwrap();
                let seq = u16::from_be_bytes([b[2], b[3]]) as u64;
                if (self.upstream_drop)(k, seq) {
                    continue;
                }
                let at = self.at();
                self.edge.handle_upstream(
                    at,
                    "live",
                    UpstreamPacket {
                        track: 0,
                        stream: k as u8,
                        rtp: &b,
                        at,
                    },
                );
            }
            self.step();
            // The next instant something happens.
            let mut next = self.next_picture;
            if let Some((t, _, _)) = self.upstream.front() {
                next = next.min(*t);
            }
            if let Some(t) = self.edge.poll_timeout() {
                next = next.min(t.saturating_duration_since(self.t0));
            }
            for (b, p) in self.browsers.iter().zip(&self.paths) {
                next = next.min(b.timeout.saturating_duration_since(self.t0));
                for l in [&p.down, &p.up] {
                    let w = l.next_wakeup();
                    if w != Time::NEVER {
                        next = next.min(Duration::from_nanos(w.0));
                    }
                }
            }
            next = next.max(self.now + Duration::from_micros(100)).min(until);
            self.now = next;
        }
    }

    /// Everything due now: edge timers and output, links, browsers.
    fn step(&mut self) {
        let at = self.at();
        let tnow = self.time();
        self.edge.handle_timeout(at);
        self.pump_edge();
        for i in 0..self.browsers.len() {
            // Edge -> browser.
            self.paths[i].down.service(tnow);
            while let Some((_, d)) = self.paths[i].down.poll_release(tnow) {
                let addr = self.browsers[i].addr;
                let r = Receive {
                    proto: Protocol::Udp,
                    source: EDGE.parse().unwrap(),
                    destination: addr,
                    contents: (&d[..]).try_into().unwrap(),
                };
                let _ = self.browsers[i].rtc.handle_input(Input::Receive(at, r));
                self.drain_browser(i);
            }
            if self.browsers[i].timeout <= at {
                self.browsers[i]
                    .rtc
                    .handle_input(Input::Timeout(at))
                    .unwrap();
                self.drain_browser(i);
            }
            let now = self.now;
            self.browsers[i].assemble(now, Duration::from_millis(400));
            self.drain_browser(i);
            // Browser -> edge.
            self.paths[i].up.service(tnow);
            while let Some((_, d)) = self.paths[i].up.poll_release(tnow) {
                let src = self.browsers[i].addr;
                self.edge
                    .handle_datagram(at, src, EDGE.parse().unwrap(), &d);
            }
        }
        self.pump_edge();
    }

    fn pump_edge(&mut self) {
        let tnow = self.time();
        while let Some(t) = self.edge.poll_transmit() {
            if let Some(i) = self.browsers.iter().position(|b| b.addr == t.destination) {
                if (self.down_drop)(self.now, i, &t.contents) {
                    continue;
                }
                let len = t.contents.len() as u32;
                self.paths[i].down.arrive(tnow, t.contents, len + 28, 0);
            }
        }
        while let Some(e) = self.edge.poll_event() {
            if let EdgeEvent::KeyRequest { .. } = &e {
                self.key_requests.push(self.now);
                self.src.request_key();
            }
            self.events.push((self.now, e));
        }
    }

    pub fn report(&self, i: usize) -> edge::ViewerReport {
        self.edge.report(self.at(), self.browsers[i].id).unwrap()
    }
}
