//! FEC before assembly: every stream the announcement gives repair parameters
//! (`proto::Stream::repair`, docs/protocols/fec.md) gets a [`FecDecoder`]. Its media packets
//! pass through it on their way out (a packet already recovered is dropped as a duplicate),
//! its repair packets stay here, and what they rebuild goes out as media marked `recovered`,
//! so the host's depacketiser sees one media stream with fewer gaps and never a repair packet.

use super::{Held, Media, Output, Subscriber};
use proto::fec::{FecDecoder, FecParams, Received};
use proto::rtp::RtpPacket;
use proto::{SessionInfo, Time};
use serde::Serialize;

/// FEC counters of the streams with repair, summed (the player exports them per second and
/// on its exit line).
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FecStats {
    /// Repair packets received.
    pub repairs: u64,
    /// Media packets rebuilt from repairs (delivered with `Media::recovered`).
    pub recovered: u64,
    /// Sequence numbers of these streams missing on the wire (media, repair or padding slots).
    pub lost: u64,
    /// `lost` less `recovered`: what repair did not rebuild. An upper bound on the media
    /// packets assembly misses, since a lost repair or padding slot counts here too.
    pub unrepaired: u64,
    /// Media packets that arrived after their recovery (dropped).
    pub duplicates: u64,
    /// Repair packets that did not parse, or rebuilt nothing usable.
    pub malformed: u64,
    /// Repairs that aged out still missing two or more packets.
    pub expired: u64,
    /// Streams whose announced repair parameters were refused (no FEC for them).
    pub bad_params: u64,
}

/// One decoder per stream with repair, by SSRC.
#[derive(Default)]
pub struct Repair {
    decoders: Vec<(u32, FecDecoder)>,
    /// Counters of decoders already replaced by a new session's.
    past: FecStats,
    lost: u64,
    duplicates: u64,
    malformed: u64,
    bad_params: u64,
}

/// What to do with one media-path packet.
pub enum Pass {
    /// Deliver it (a new media packet, or a stream without repair).
    Deliver,
    /// Keep it from the host: a repair packet, a duplicate of a recovered packet, or a
    /// malformed repair.
    Consume,
}

impl Repair {
    /// Decoders for the streams of a newly accepted session description.
    pub fn configure(&mut self, info: &SessionInfo) {
        self.past = self.stats();
        (self.lost, self.duplicates, self.malformed) = (0, 0, 0);
        self.decoders.clear();
        // The audio track repairs itself (`crate::audio`): its packets never come here.
        let video = info
            .tracks
            .iter()
            .filter(|t| t.kind != proto::TrackKind::Audio);
        for s in video.flat_map(|t| t.streams.iter()) {
            let Some(r) = &s.repair else { continue };
            match FecParams::from_announced(r.payload_type, &r.params) {
                Ok(p) => self.decoders.push((s.ssrc, FecDecoder::new(p))),
                Err(_) => self.bad_params += 1,
            }
        }
    }

    /// Whether `ssrc` is a stream with repair.
    pub fn protects(&self, ssrc: u32) -> bool {
        self.decoders.iter().any(|(s, _)| *s == ssrc)
    }

    /// `n` sequence numbers of stream `ssrc` were skipped on the wire.
    pub fn note_lost(&mut self, ssrc: u32, n: u64) {
        if self.protects(ssrc) {
            self.lost += n;
        }
    }

    /// Passes one received RTP packet of stream `ssrc` through its decoder; packets it
    /// rebuilds are appended to `recovered`.
    pub fn push(&mut self, ssrc: u32, packet: &[u8], recovered: &mut Vec<Vec<u8>>) -> Pass {
        let Some((_, d)) = self.decoders.iter_mut().find(|(s, _)| *s == ssrc) else {
            return Pass::Deliver;
        };
        let Ok(p) = RtpPacket::parse(packet) else {
            return Pass::Deliver;
        };
        let verdict = d.push(&p);
        recovered.extend(std::iter::from_fn(|| d.poll_recovered()));
        match verdict {
            Ok(Received::Media) => Pass::Deliver,
            Ok(Received::Repair) => Pass::Consume,
            Ok(Received::Duplicate) => {
                self.duplicates += 1;
                Pass::Consume
            }
            Err(_) => {
                self.malformed += 1;
                Pass::Consume
            }
        }
    }

    /// The counters since start.
    pub fn stats(&self) -> FecStats {
        let mut s = self.past;
        for (_, d) in &self.decoders {
            let ds = d.stats();
            s.repairs += ds.repairs;
            s.recovered += ds.recovered;
            s.expired += ds.expired;
            s.malformed += ds.unusable;
        }
        s.lost += self.lost;
        s.duplicates += self.duplicates;
        s.malformed += self.malformed;
        s.bad_params = self.bad_params;
        s.unrepaired = s.lost.saturating_sub(s.recovered);
        s
    }
}

impl Subscriber {
    /// Media out, through FEC repair: a stream's repair packets stay in, what they rebuild
    /// goes out after the packet that completed it.
    pub(super) fn deliver_held(&mut self, held: Vec<Held>) {
        let mut rebuilt = Vec::new();
        for h in held {
            let pass = self.repair.push(h.ssrc, &h.packet, &mut rebuilt);
            if matches!(pass, Pass::Deliver) {
                self.deliver_one(h.layer, h.ssrc, h.recv_time, h.packet, false);
            }
            for packet in rebuilt.drain(..) {
                self.deliver_one(h.layer, h.ssrc, h.recv_time, packet, true);
            }
        }
    }

    fn deliver_one(
        &mut self,
        layer: u8,
        ssrc: u32,
        recv_time: Time,
        packet: Vec<u8>,
        recovered: bool,
    ) {
        let (track, stream) = self
            .info
            .as_ref()
            .and_then(|i| {
                i.tracks.iter().find_map(|t| {
                    t.stream_by_ssrc(ssrc)
                        .map(|(k, _)| (Some(t.id), Some(k as u8)))
                })
            })
            .unwrap_or((None, None));
        self.out.push_back(Output::Media(Media {
            track,
            stream,
            layer,
            ssrc,
            recv_time,
            recovered,
            packet,
        }));
    }
}
