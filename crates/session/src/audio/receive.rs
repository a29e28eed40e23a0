//! The audio track's receive side: the audio stream's and its repair stream's datagrams
//! (opened) with their receive times in; repair (lagged one-packet repairs through
//! [`proto::fec::FecDecoder`]: what it rebuilds arrives as if with the repair that completed
//! it), the jitter buffer and playout ([`super::playout`]); frames to play and refused packets
//! out.

use super::playout::{PlayFrame, Playout, PlayoutStats, Refusal};
use super::AudioLayout;
use proto::fec::{FecDecoder, FecParams};
use proto::rtp::RtpPacket;
use serde::Serialize;
use std::collections::VecDeque;

/// Refused packets remembered for the host (bounded: a flood of garbage is counted, not kept).
const MAX_REFUSED: usize = 64;

/// What the receive side hands its host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AudioOutput {
    /// Play this frame now.
    Play(PlayFrame),
    /// A packet received at `recv_ns` was not taken.
    Refused { recv_ns: u64, why: Refusal },
}

/// Counters of the receive side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AudioStats {
    #[serde(flatten)]
    pub playout: PlayoutStats,
    /// Datagrams that did not open (encrypted sessions).
    pub auth_failed: u64,
    /// Repair packets received; malformed or of another payload type; audio packets rebuilt
    /// from them.
    pub repairs: u64,
    pub bad_repairs: u64,
    pub repaired: u64,
}

/// The receive side of the audio track.
#[derive(Debug)]
pub struct AudioReceive {
    layout: AudioLayout,
    playout: Playout,
    /// The repair decoder and the repair payload type, when the stream has repair.
    fec: Option<(FecDecoder, u8)>,
    /// First audio sequence number received: the first repairs carry packets from before it
    /// (sent before the join), which are not losses and are not played.
    first_seq: Option<u16>,
    out: VecDeque<AudioOutput>,
    stats: AudioStats,
}

impl AudioReceive {
    /// The receive side of track `l`, playing `delay_ns` after the first packet.
    pub fn new(l: &AudioLayout, delay_ns: u64) -> AudioReceive {
        let fec = l.repair.as_ref().and_then(|(pt, params)| {
            FecParams::from_announced(*pt, params)
                .ok()
                .map(|p| (FecDecoder::new(p), *pt))
        });
        AudioReceive {
            playout: Playout::new(l.payload_type, Some(l.ssrc), delay_ns),
            layout: l.clone(),
            fec,
            first_seq: None,
            out: VecDeque::new(),
            stats: AudioStats::default(),
        }
    }

    pub fn layout(&self) -> &AudioLayout {
        &self.layout
    }

    pub fn stats(&self) -> AudioStats {
        AudioStats {
            playout: crate::audio::playout::PlayoutStats {
                delay_ms: self.playout.delay_ns() / 1_000_000,
                ..self.playout.stats
            },
            ..self.stats
        }
    }

    /// The next frame to play: (local ns, extended RTP time), for the host's audio clock.
    pub fn anchor(&self) -> Option<(u64, u64)> {
        self.playout.anchor()
    }

    /// Whether a new sender instance began since the last call (its clock mapping is new).
    pub fn take_new_instance(&mut self) -> bool {
        self.playout.take_new_instance()
    }

    /// When [`AudioReceive::poll`] next has a frame to play.
    pub fn next_due(&self) -> Option<u64> {
        if self.out.is_empty() {
            self.playout.next_due()
        } else {
            Some(0)
        }
    }

    /// Plays from the next frame on `by_ns` later ([`Playout::delay_later`]).
    pub fn delay_later(&mut self, by_ns: u64) {
        self.playout.delay_later(by_ns);
    }

    /// Lowers the delay by up to `by_ns` as the packets allow, by frames the host cuts short
    /// ([`Playout::lower_delay`]); returns what it will lower, ns.
    pub fn lower_delay(&mut self, by_ns: u64) -> u64 {
        self.playout.lower_delay(by_ns)
    }

    /// The host cut `samples` (per channel) out of the frame it was just given
    /// ([`Playout::shortened`]).
    pub fn shortened(&mut self, samples: usize) {
        self.playout.shortened(samples);
    }

    /// The playout delay now, ns.
    pub fn delay_ns(&self) -> u64 {
        self.playout.delay_ns()
    }

    /// A datagram of the audio stream failed to open.
    pub fn auth_failed(&mut self) {
        self.stats.auth_failed += 1;
    }

    /// An audio packet (opened) received at `recv_ns`.
    pub fn push_media(&mut self, recv_ns: u64, packet: &[u8]) {
        if let (Some((dec, _)), Ok(p)) = (self.fec.as_mut(), RtpPacket::parse(packet)) {
            if p.ssrc() == self.layout.ssrc {
                self.first_seq.get_or_insert(p.sequence_number());
                let _ = dec.push(&p);
            }
        }
        self.take(recv_ns, packet);
        self.recovered(recv_ns);
    }

    /// A repair packet (opened) received at `recv_ns`.
    pub fn push_repair(&mut self, recv_ns: u64, packet: &[u8]) {
        self.stats.repairs += 1;
        let ok = match (self.fec.as_mut(), RtpPacket::parse(packet)) {
            (Some((dec, pt)), Ok(p)) if p.payload_type() == *pt => {
                dec.push_separate_repair(p.payload()).is_ok()
            }
            _ => false,
        };
        if !ok {
            self.stats.bad_repairs += 1;
        }
        self.recovered(recv_ns);
    }

    fn recovered(&mut self, recv_ns: u64) {
        let Some((dec, _)) = self.fec.as_mut() else {
            return;
        };
        let mut rebuilt = Vec::new();
        while let Some(rec) = dec.poll_recovered() {
            rebuilt.push(rec);
        }
        for rec in rebuilt {
            let seq = RtpPacket::parse(&rec).map_or(0, |p| p.sequence_number());
            if self
                .first_seq
                .is_none_or(|f| (seq.wrapping_sub(f) as i16) < 0)
            {
                continue;
            }
            self.stats.repaired += 1;
            self.take(recv_ns, &rec);
        }
    }

    fn take(&mut self, recv_ns: u64, packet: &[u8]) {
        if let Err(why) = self.playout.push(recv_ns, packet) {
            if self.out.len() < MAX_REFUSED {
                self.out.push_back(AudioOutput::Refused { recv_ns, why });
            }
        }
    }

    /// The next output due by `now_ns`: refused packets first, then the frames whose play
    /// time has come, one by one.
    pub fn poll(&mut self, now_ns: u64) -> Option<AudioOutput> {
        if let Some(o) = self.out.pop_front() {
            return Some(o);
        }
        self.playout.poll(now_ns).map(AudioOutput::Play)
    }

    /// The host could not decode `f`.
    pub fn decode_failed(&mut self, f: &PlayFrame) {
        self.playout.decode_failed(f);
    }
}
