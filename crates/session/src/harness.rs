//! The in-process harness: one [`Publisher`], one [`netmodel::Link`] per viewer (its
//! bottleneck: rate, delay, jitter, loss, queue) and N [`Subscriber`]s, in virtual time.
//! Deterministic (the links draw from seeded generators; nothing reads a clock), so product
//! behaviour is tested here first, in milliseconds, and on the namespace testbed second.
//!
//! ```text
//! Publisher --bunch--> [router: copies each packet to every viewer holding its group]
//!     ^                   --> Link(viewer) --> Subscriber --Join/Leave--> router
//!     |                                                   --Transmit----+
//!     +------------------- feedback (reports, media requests) ----------+
//! ```
//!
//! Datagrams the Publisher sends on their own (the audio track's packets and repairs) take the
//! same router and links; its retransmissions go by unicast to the viewer that asked, through
//! that viewer's link. The router joins at once and leaves at once (a fast-leave IGMP router next to the
//! bottleneck); feedback reaches the publisher after `feedback_delay`. Each packet counts
//! its UDP payload plus [`WIRE_OVERHEAD`] bytes on the link, as tbf and the link emulator
//! count Ethernet frames.

use crate::audio::{AudioOutput, PlayFrame};
use crate::publisher::{Publisher, PublisherConfig};
use crate::subscriber::{Announcement, Event, Media, Output, Snapshot, Subscriber};
use congestion::Decision;
use netmodel::{Link, LinkConfig};
use proto::{SessionInfo, Time};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// UDP + IPv4 + Ethernet header bytes a packet takes on a link besides its payload.
pub const WIRE_OVERHEAD: u32 = 8 + 20 + 14;

/// A datagram in flight to a viewer.
#[derive(Clone, Debug)]
struct Datagram {
    group: Ipv4Addr,
    port: u16,
    bytes: Vec<u8>,
    /// A retransmission sent to this viewer alone (not through a group).
    unicast: bool,
}

/// One viewer: its bottleneck and its Subscriber, and what it said.
pub struct Viewer {
    pub sub: Subscriber,
    link: Link<Datagram>,
    joined: Vec<(Ipv4Addr, u16)>,
    /// Its address as the sender sees its feedback.
    pub addr: SocketAddr,
    /// Retransmitted packets its link delivered.
    pub retransmitted: u64,
    pub snapshots: Vec<Snapshot>,
    pub decisions: Vec<Decision>,
    /// Media packets delivered.
    pub media: u64,
    /// Keep every delivered media packet in `media_packets` (tests that look at them).
    pub keep_media: bool,
    pub media_packets: Vec<Media>,
    /// Audio frames the Subscriber gave to play, by what plays them, and packets it refused.
    pub audio_frames: Vec<PlayFrame>,
    pub audio_refused: u64,
    /// Datagrams the link delivered, per (group, port).
    pub delivered: HashMap<(Ipv4Addr, u16), u64>,
    next_timeout: Time,
}

impl Viewer {
    /// The layers held per snapshot: (time, layers).
    pub fn levels(&self) -> Vec<(Time, u32)> {
        self.snapshots.iter().map(|s| (s.at, s.layers)).collect()
    }

    /// The bottleneck's parameters from `now` on.
    pub fn set_link(&mut self, now: Time, cfg: LinkConfig) -> crate::Result<()> {
        self.link
            .reconfigure(now, cfg)
            .map_err(|e| crate::Error::Config(e.to_string()))
    }
}

/// A Publisher, the links and the Subscribers.
pub struct Harness {
    pub now: Time,
    pub publisher: Publisher,
    pub viewers: Vec<Viewer>,
    info: SessionInfo,
    next_announce: Time,
    feedback: Vec<(Time, SocketAddr, Vec<u8>)>,
    pub feedback_delay: Duration,
}

impl Harness {
    /// A session sent by a publisher built from `cfg` (its `start` is time zero here).
    pub fn new(cfg: PublisherConfig) -> crate::Result<Harness> {
        let info = cfg.info.clone();
        Ok(Harness {
            now: Time::ZERO,
            publisher: Publisher::new(cfg)?,
            viewers: Vec::new(),
            info,
            next_announce: Time::ZERO,
            feedback: Vec::new(),
            feedback_delay: Duration::from_millis(10),
        })
    }

    /// Adds a viewer behind a link of `cfg` (random draws from `seed`); it hears the next
    /// announcement.
    pub fn add_viewer(
        &mut self,
        sub: Subscriber,
        cfg: LinkConfig,
        seed: u64,
    ) -> crate::Result<usize> {
        let link = Link::new(cfg, seed).map_err(|e| crate::Error::Config(e.to_string()))?;
        let n = self.viewers.len();
        self.viewers.push(Viewer {
            sub,
            link,
            joined: Vec::new(),
            addr: SocketAddr::new(
                IpAddr::V4(Ipv4Addr::new(10, 9, (n >> 8) as u8, n as u8 + 2)),
                40_000,
            ),
            retransmitted: 0,
            snapshots: Vec::new(),
            decisions: Vec::new(),
            media: 0,
            keep_media: false,
            media_packets: Vec::new(),
            audio_frames: Vec::new(),
            audio_refused: 0,
            delivered: HashMap::new(),
            next_timeout: Time::ZERO,
        });
        self.next_announce = self.now;
        Ok(n)
    }

    /// Runs until `until`.
    pub fn run_until(&mut self, until: Time) {
        while self.now < until {
            let next = self.next_event().min(until);
            self.now = self.now.max(next);
            self.step();
        }
    }

    fn next_event(&self) -> Time {
        let mut t = self
            .publisher
            .poll_timeout(self.now)
            .min(self.next_announce);
        for v in &self.viewers {
            t = t.min(v.link.next_wakeup()).min(v.next_timeout);
        }
        if let Some(f) = self.feedback.first() {
            t = t.min(f.0);
        }
        t.max(self.now)
    }

    fn step(&mut self) {
        let now = self.now;
        // Feedback due at the publisher.
        while self.feedback.first().is_some_and(|f| f.0 <= now) {
            let (_, from, bytes) = self.feedback.remove(0);
            self.publisher.handle_feedback(now, from, &bytes);
        }
        // Announcements, once per announce interval.
        if now >= self.next_announce {
            for v in &mut self.viewers {
                v.sub
                    .handle_announcement(now, Announcement::Info(self.info.clone()));
                v.next_timeout = now;
            }
            self.next_announce = now + self.info.announce_interval;
        }
        // The publisher's bunches, copied to every viewer holding the group.
        while let Some(b) = self.publisher.poll_transmit(now) {
            for (p, d) in b.packets.iter().zip(b.dests) {
                for v in &mut self.viewers {
                    if v.joined.contains(&(*d.ip(), d.port())) {
                        let dg = Datagram {
                            group: *d.ip(),
                            port: d.port(),
                            bytes: p.clone(),
                            unicast: false,
                        };
                        v.link.arrive(now, dg, p.len() as u32 + WIRE_OVERHEAD, 0);
                        v.next_timeout = v.next_timeout.min(v.link.next_wakeup());
                    }
                }
            }
        }
        // Datagrams sent on their own (the audio track's), to every viewer holding the group.
        while let Some(d) = self.publisher.poll_datagram() {
            for v in &mut self.viewers {
                if v.joined.contains(&(*d.to.ip(), d.to.port())) {
                    let size = d.bytes.len() as u32 + WIRE_OVERHEAD;
                    let dg = Datagram {
                        group: *d.to.ip(),
                        port: d.to.port(),
                        bytes: d.bytes.clone(),
                        unicast: false,
                    };
                    v.link.arrive(now, dg, size, 0);
                    v.next_timeout = v.next_timeout.min(v.link.next_wakeup());
                }
            }
        }
        // Retransmissions, to the viewer that asked.
        while let Some((to, bytes)) = self.publisher.poll_retransmit(now) {
            if let Some(v) = self.viewers.iter_mut().find(|v| v.addr == to) {
                let size = bytes.len() as u32 + WIRE_OVERHEAD;
                let dg = Datagram {
                    group: Ipv4Addr::UNSPECIFIED,
                    port: 0,
                    bytes,
                    unicast: true,
                };
                v.link.arrive(now, dg, size, 0);
                v.next_timeout = v.next_timeout.min(v.link.next_wakeup());
            }
        }
        while self.publisher.poll_encoder_control(now).is_some() {}
        // Links deliver; Subscribers run.
        for v in &mut self.viewers {
            v.link.service(now);
            while let Some((at, d)) = v.link.poll_release(now) {
                if d.unicast {
                    v.retransmitted += 1;
                    v.sub.handle_retransmission(now, at, &d.bytes);
                    continue;
                }
                // A packet for a group left while it was in flight is not delivered.
                if v.joined.contains(&(d.group, d.port)) {
                    *v.delivered.entry((d.group, d.port)).or_default() += 1;
                    v.sub.handle_datagram(now, d.group, d.port, at, &d.bytes);
                }
            }
            if now >= v.next_timeout {
                v.sub.handle_timeout(now);
            }
            loop {
                match v.sub.poll_output() {
                    Output::Timeout(t, _) => {
                        v.next_timeout = t.max(now + Duration::from_micros(1));
                        break;
                    }
                    Output::Join(e) => {
                        if !v.joined.contains(&(e.group, e.port)) {
                            v.joined.push((e.group, e.port));
                        }
                    }
                    Output::Leave(e) => v.joined.retain(|x| *x != (e.group, e.port)),
                    Output::Transmit(t) => {
                        self.feedback
                            .push((now + self.feedback_delay, v.addr, t.payload));
                    }
                    Output::Media(m) => {
                        v.media += 1;
                        if v.keep_media {
                            v.media_packets.push(m);
                        }
                    }
                    Output::Audio(AudioOutput::Play(f)) => v.audio_frames.push(f),
                    Output::Audio(AudioOutput::Refused { .. }) => v.audio_refused += 1,
                    Output::Event(Event::Stats(s)) => v.snapshots.push(*s),
                    Output::Event(Event::Decision(d)) => v.decisions.push(d),
                    Output::Event(_) => {}
                }
            }
        }
        self.feedback.sort_by_key(|f| f.0);
    }
}
