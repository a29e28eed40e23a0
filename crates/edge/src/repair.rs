//! Upstream FEC at the edge: the session's video streams may carry XOR repair packets in their
//! padding slots (docs/protocols/fec.md, announced per stream in the session description).
//! Browsers must never get them as video (they are another payload type in the same sequence
//! space), and the edge is the one receiver on its upstream path, so it uses them: a media
//! packet lost upstream and rebuilt from a repair goes into the frame gate like any other,
//! before a frame of every browser would wait for it. Repair packets themselves stop here.
//!
//! One [`codec::fec::FecDecoder`] per stream that announces repair; a stream without it passes
//! its packets straight through.

use codec::fec::{FecDecoder, FecParams, Received};
use codec::rtp::RtpPacket;
use proto::media::TrackKind;
use proto::SessionInfo;

/// Counters of the upstream repair (raw, never reset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairStats {
    /// Repair packets received (and dropped after use).
    pub repairs: u64,
    /// Media packets rebuilt from them and handed to the gate.
    pub recovered: u64,
    /// Repair packets that did not parse.
    pub malformed: u64,
    /// Media packets received a second time (one that was already recovered): dropped.
    pub duplicates: u64,
    /// Streams whose announced repair parameters did not parse: their repair packets are
    /// dropped unused (the gate ignores their payload type).
    pub unusable_streams: u64,
}

/// What to do with one upstream video packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Media: hand it to the gate.
    Media,
    /// A repair packet or a duplicate: it stops here.
    Drop,
}

/// The FEC decoders of a session's video streams.
#[derive(Debug)]
pub struct UpstreamRepair {
    decoders: Vec<Option<FecDecoder>>,
    stats: RepairStats,
}

impl UpstreamRepair {
    /// Decoders for the streams of the session's video track that announce repair.
    pub fn new(info: &SessionInfo) -> UpstreamRepair {
        let mut stats = RepairStats::default();
        let decoders = info
            .track(TrackKind::Video)
            .map(|t| {
                t.streams
                    .iter()
                    .map(|s| {
                        let r = s.repair.as_ref()?;
                        match FecParams::from_announced(r.payload_type, &r.params) {
                            Ok(p) => Some(FecDecoder::new(p)),
                            Err(_) => {
                                stats.unusable_streams += 1;
                                None
                            }
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        UpstreamRepair { decoders, stats }
    }

    pub fn stats(&self) -> RepairStats {
        self.stats
    }

    /// One upstream packet of video stream `stream`: whether the gate gets it, and the media
    /// packets it let the decoder rebuild (serialised RTP; older than `rtp`, so the gate should
    /// get them first).
    pub fn push(&mut self, stream: usize, rtp: &[u8], recovered: &mut Vec<Vec<u8>>) -> Verdict {
        let Some(Some(dec)) = self.decoders.get_mut(stream) else {
            return Verdict::Media;
        };
        // A packet that does not parse is the gate's to count as malformed.
        let Ok(pkt) = RtpPacket::parse(rtp) else {
            return Verdict::Media;
        };
        let verdict = dec.push(&pkt);
        let before = recovered.len();
        recovered.extend(std::iter::from_fn(|| dec.poll_recovered()));
        self.stats.recovered += (recovered.len() - before) as u64;
        match verdict {
            Ok(Received::Media) => Verdict::Media,
            Ok(Received::Repair) => {
                self.stats.repairs += 1;
                Verdict::Drop
            }
            Ok(Received::Duplicate) => {
                self.stats.duplicates += 1;
                Verdict::Drop
            }
            Err(_) => {
                self.stats.repairs += 1;
                self.stats.malformed += 1;
                Verdict::Drop
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::gate::GateEvent;
    use crate::relay::{Relay, RelayConfig, UpstreamPacket};
    use crate::source::{Source, SourcePicture};
    use codec::fec::{FecEncoder, FecParams};
    use codec::rtp::RtpPacket;
    use codec::vp9rtp::LayerPacket;
    use proto::media::{Repair, TrackKind};
    use proto::SessionInfo;
    use std::time::{Duration, Instant};

    /// The source's packets as the server sends them with FEC: each layer renumbered, one
    /// repair packet after each picture's packets of the layer. `drop(i, k)`: the first media
    /// packet of layer `k` in picture `i` is lost upstream. Returns (picture, layer, bytes).
    fn with_repair(
        pics: &[SourcePicture],
        drop: impl Fn(usize, usize) -> bool,
    ) -> Vec<(usize, usize, Vec<u8>)> {
        let layers = pics[0].layers.len();
        let mut enc: Vec<FecEncoder> = (0..layers)
            .map(|_| FecEncoder::new(FecParams::default(), 1500).unwrap())
            .collect();
        let mut seq = vec![1000u16; layers];
        let mut out = Vec::new();
        for (i, p) in pics.iter().enumerate() {
            for (k, pkts) in p.layers.iter().enumerate() {
                for (j, b) in pkts.iter().enumerate() {
                    let rp = RtpPacket::parse(b).unwrap();
                    let mut header = rp.to_header();
                    header.sequence_number = seq[k];
                    let lp = LayerPacket {
                        layer: k,
                        header,
                        payload: rp.payload().to_vec(),
                    };
                    enc[k].push_media(seq[k], &lp.header, &lp.payload);
                    seq[k] = seq[k].wrapping_add(1);
                    if !(j == 0 && drop(i, k)) {
                        out.push((i, k, lp.to_bytes(&[]).unwrap()));
                    }
                }
                if let Some(mut r) = enc[k].repair() {
                    r.header.sequence_number = seq[k];
                    seq[k] = seq[k].wrapping_add(1);
                    let mut bytes = Vec::new();
                    r.header.write(&r.payload, &mut bytes).unwrap();
                    out.push((i, k, bytes));
                }
            }
        }
        out
    }

    /// Runs the packets through a relay; returns (frames lost, the relay).
    fn run(info: SessionInfo, packets: &[(usize, usize, Vec<u8>)]) -> (usize, Relay) {
        let mut relay = Relay::new("t", info, RelayConfig::default()).unwrap();
        let t0 = Instant::now();
        let mut lost = 0;
        let mut drain = |relay: &mut Relay, at: Instant| {
            relay.handle_timeout(at);
            while let Some(ev) = relay.poll_gate_event() {
                lost += matches!(ev, GateEvent::Lost { .. }) as usize;
            }
        };
        for (i, k, b) in packets {
            let at = t0 + Duration::from_millis(33 * *i as u64);
            relay.push(UpstreamPacket {
                track: 0,
                stream: *k as u8,
                rtp: b,
                at,
            });
            drain(&mut relay, at);
        }
        drain(&mut relay, t0 + Duration::from_secs(60));
        (lost, relay)
    }

    #[test]
    fn repair_packets_rebuild_upstream_losses_and_never_reach_the_gate() {
        let mut src = Source::small_l3t3(1000, 0).unwrap();
        let pics: Vec<SourcePicture> = (0..60).map(|_| src.next_picture().unwrap()).collect();
        // A loss every third picture, on a layer that picture has, a different one each time.
        let lose: Vec<(usize, usize)> = (0..pics.len())
            .filter(|i| i % 3 == 1)
            .filter_map(|i| {
                (0..9)
                    .map(|d| (i / 3 + d) % 9)
                    .find(|&k| !pics[i].layers[k].is_empty())
                    .map(|k| (i, k))
            })
            .collect();
        let packets = with_repair(&pics, |i, k| lose.contains(&(i, k)));
        let dropped = lose.len() as u64;
        assert!(dropped >= 10);

        let mut info = src.session().clone();
        let plain = info.clone();
        for s in &mut info.tracks[0].streams {
            s.repair = Some(Repair {
                payload_type: 97,
                params: FecParams::default().announced_params(),
            });
        }
        assert_eq!(info.track(TrackKind::Video).unwrap().streams.len(), 9);
        let (lost, relay) = run(info, &packets);
        let st = relay.stats();
        assert_eq!(st.repair.recovered, dropped, "{st:?}");
        assert_eq!(lost, 0, "{st:?}");
        assert_eq!(
            st.gate.ignored, 0,
            "a repair packet reached the gate: {st:?}"
        );
        assert!(st.repair.repairs >= pics.len() as u64, "{st:?}");

        // The same packets to a session that does not announce repair: the repair packets
        // are ignored by payload type, and the losses cost frames.
        let (lost, relay) = run(plain, &packets);
        let st = relay.stats();
        assert_eq!(st.repair.recovered, 0);
        assert!(st.gate.ignored >= pics.len() as u64, "{st:?}");
        assert!(lost > 0, "{st:?}");
    }

    #[test]
    fn unparsable_repair_parameters_are_counted_not_fatal() {
        let src = Source::small_l3t3(1000, 0).unwrap();
        let mut info = src.session().clone();
        info.tracks[0].streams[0].repair = Some(Repair {
            payload_type: 97,
            params: vec![0xff; 3],
        });
        let r = super::UpstreamRepair::new(&info);
        assert_eq!(r.stats().unusable_streams, 1);
    }
}
