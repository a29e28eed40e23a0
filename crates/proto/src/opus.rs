//! Opus over RTP (RFC 7587): a packetizer and a depacketizer. The libopus encoder and decoder
//! are the codec crate's (`codec::opus`, which re-exports this module).
//!
//! One Opus packet per RTP packet, no payload header (RFC 7587 §4.2); the RTP clock is always
//! 48 kHz whatever the coded bandwidth (§4.1), and the marker bit is set on the first packet of
//! a talkspurt (here: the first packet of a stream and the first after a discontinuity). The
//! depacketizer checks the RTP header and the Opus packet's own framing (RFC 6716 §3.4,
//! requirements R1-R7) so that a malformed packet is refused before it reaches the decoder, and
//! extends sequence numbers and timestamps to 64 bits for the jitter buffer.

use crate::error::{Error, Result};
use crate::rtp::{RtpHeader, RtpPacket};

/// A refused Opus packet.
fn bad(detail: &'static str) -> Error {
    Error::Malformed {
        what: "opus packet",
        detail: detail.into(),
    }
}

/// The RTP clock of Opus (RFC 7587 §4.1).
pub const CLOCK_RATE: u32 = 48_000;
/// Samples per channel in a 20-ms frame at 48 kHz.
pub const FRAME_20MS: u32 = 960;
/// Longest Opus packet duration (RFC 6716 §3.2.5: 120 ms).
pub const MAX_PACKET_SAMPLES: u32 = 5760;
/// Largest Opus packet the depacketizer accepts (RFC 6716 §3.4 R2 bounds a frame to 1275
/// bytes; 3 frames of 20 ms carry at most 3 x 1275 plus framing).
pub const MAX_PACKET_BYTES: usize = 4000;

/// Duration of one Opus frame, in 48-kHz samples, from the TOC byte's configuration (RFC 6716
/// §3.1, Table 2).
pub fn frame_samples(toc: u8) -> u32 {
    let config = toc >> 3;
    match config {
        // SILK-only NB/MB/WB: 10, 20, 40, 60 ms.
        0..=11 => [480, 960, 1920, 2880][(config & 3) as usize],
        // Hybrid SWB/FB: 10, 20 ms.
        12..=15 => [480, 960][(config & 1) as usize],
        // CELT-only: 2.5, 5, 10, 20 ms.
        _ => [120, 240, 480, 960][(config & 3) as usize],
    }
}

/// What an Opus packet holds (RFC 6716 §3.2), checked against R1-R7 of §3.4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// Frames in the packet.
    pub frames: u32,
    /// Samples per channel at 48 kHz (frames x frame duration).
    pub samples: u32,
    /// Stereo flag of the TOC byte.
    pub stereo: bool,
}

/// Reads a frame length (RFC 6716 §3.2.1): one byte 0..=251, or two bytes.
fn frame_len(b: &[u8]) -> Result<(usize, usize)> {
    match b {
        [] => Err(bad("opus: frame length missing")),
        [x, ..] if *x < 252 => Ok((*x as usize, 1)),
        [x, y, ..] => Ok((*y as usize * 4 + *x as usize, 2)),
        [_] => Err(bad("opus: frame length truncated")),
    }
}

/// Checks an Opus packet's framing (RFC 6716 §3.4) and says how long it is.
pub fn packet_info(p: &[u8]) -> Result<PacketInfo> {
    // R1: at least one byte.
    let (&toc, rest) = p.split_first().ok_or(bad("opus: empty packet"))?;
    if p.len() > MAX_PACKET_BYTES {
        return Err(bad("opus: packet too long"));
    }
    let fs = frame_samples(toc);
    let stereo = toc & 0x04 != 0;
    let frames = match toc & 3 {
        // Code 0: one frame; R2: at most 1275 bytes.
        0 => {
            if rest.len() > 1275 {
                return Err(bad("opus: frame over 1275 bytes"));
            }
            1
        }
        // Code 1: two frames of equal size; R3: odd payload length is invalid.
        1 => {
            if rest.len() % 2 != 0 || rest.len() / 2 > 1275 {
                return Err(bad("opus: code 1 with unequal frames"));
            }
            2
        }
        // Code 2: two frames, the first's length coded; R4.
        2 => {
            let (n1, used) = frame_len(rest)?;
            let left = rest.len() - used;
            if n1 > left || n1 > 1275 || left - n1 > 1275 {
                return Err(bad("opus: code 2 frame length"));
            }
            2
        }
        // Code 3: a frame count byte; R5-R7.
        _ => {
            let (&fc, mut body) = rest
                .split_first()
                .ok_or(bad("opus: code 3 without frame count"))?;
            let m = (fc & 0x3f) as u32;
            if m == 0 || m * fs > MAX_PACKET_SAMPLES {
                return Err(bad("opus: code 3 frame count"));
            }
            let vbr = fc & 0x80 != 0;
            // Padding (§3.2.5): a run of length bytes, 255 meaning 254 more and continue.
            let mut pad = 0usize;
            if fc & 0x40 != 0 {
                loop {
                    let (&b, r) = body
                        .split_first()
                        .ok_or(bad("opus: padding length truncated"))?;
                    body = r;
                    if b == 255 {
                        pad += 254;
                    } else {
                        pad += b as usize;
                        break;
                    }
                }
            }
            let mut avail = body
                .len()
                .checked_sub(pad)
                .ok_or(bad("opus: padding longer than the packet"))?;
            if vbr {
                let mut coded = 0usize;
                let mut b = body;
                for _ in 0..m - 1 {
                    let (n, used) = frame_len(b)?;
                    b = &b[used..];
                    avail = avail
                        .checked_sub(used)
                        .ok_or(bad("opus: frame lengths truncated"))?;
                    if n > 1275 {
                        return Err(bad("opus: frame over 1275 bytes"));
                    }
                    coded += n;
                }
                // R6: the coded lengths fit, and the last frame is at most 1275 bytes.
                if coded > avail || avail - coded > 1275 {
                    return Err(bad("opus: VBR frame lengths"));
                }
            } else if avail % m as usize != 0 || avail / m as usize > 1275 {
                // R5: CBR frames divide the payload evenly.
                return Err(bad("opus: CBR frames of unequal length"));
            }
            m
        }
    };
    Ok(PacketInfo {
        frames,
        samples: frames * fs,
        stereo,
    })
}

/// Builds the RTP packets of one Opus stream: its own SSRC and sequence space, the 48-kHz
/// timestamp of each packet's first sample.
#[derive(Clone, Debug)]
pub struct OpusPacketizer {
    pub payload_type: u8,
    pub ssrc: u32,
    seq: u16,
    /// Marker on the next packet (start of stream or after a discontinuity).
    marker: bool,
}

impl OpusPacketizer {
    pub fn new(payload_type: u8, ssrc: u32, first_seq: u16) -> OpusPacketizer {
        OpusPacketizer {
            payload_type,
            ssrc,
            seq: first_seq,
            marker: true,
        }
    }

    /// The next packet carries the marker bit (a new talkspurt: the source restarted).
    pub fn discontinuity(&mut self) {
        self.marker = true;
    }

    /// The RTP packet of one Opus packet whose first sample has RTP time `timestamp`.
    /// Refuses (writing nothing) a payload that is not a valid Opus packet.
    pub fn packetize(&mut self, opus: &[u8], timestamp: u32) -> Result<Vec<u8>> {
        packet_info(opus)?;
        let h = RtpHeader {
            marker: self.marker,
            payload_type: self.payload_type,
            sequence_number: self.seq,
            timestamp,
            ssrc: self.ssrc,
            ..Default::default()
        };
        let v = h.to_vec(opus)?;
        self.seq = self.seq.wrapping_add(1);
        self.marker = false;
        Ok(v)
    }
}

/// One received Opus packet, checked, with 64-bit sequence number and timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpusRtp {
    pub ssrc: u32,
    /// Extended sequence number (the first packet of an SSRC keeps its 16-bit value).
    pub seq: u64,
    /// Extended RTP timestamp (48 kHz).
    pub timestamp: u64,
    pub marker: bool,
    pub info: PacketInfo,
    /// The Opus packet.
    pub payload: Vec<u8>,
    /// The SSRC changed with this packet (a new sender instance): restart the stream.
    pub new_stream: bool,
}

/// Parses RTP packets of one Opus stream: checks the payload type and the Opus framing, and
/// extends sequence numbers and timestamps across wrap-around relative to the highest seen.
#[derive(Clone, Debug)]
pub struct OpusDepacketizer {
    payload_type: u8,
    ssrc: Option<u32>,
    /// Highest extended sequence number and the extended timestamp of that packet.
    highest: Option<(u64, u64)>,
}

/// Extends a 16- or 32-bit wrapping value `v` to 64 bits, nearest to `reference`.
fn extend(reference: u64, v: u64, bits: u32) -> u64 {
    let m = 1u64 << bits;
    let half = m / 2;
    let cand = (reference & !(m - 1)) | v;
    if cand + half < reference {
        cand + m
    } else if cand > reference + half && cand >= m {
        cand - m
    } else {
        cand
    }
}

impl OpusDepacketizer {
    pub fn new(payload_type: u8) -> OpusDepacketizer {
        OpusDepacketizer {
            payload_type,
            ssrc: None,
            highest: None,
        }
    }

    /// Parses one datagram. Errors for anything that is not an RTP packet of this payload type
    /// carrying a valid Opus packet; the state is unchanged by a refused packet.
    pub fn depacketize(&mut self, datagram: &[u8]) -> Result<OpusRtp> {
        let p = RtpPacket::parse(datagram)?;
        if p.payload_type() != self.payload_type {
            return Err(Error::Invalid {
                field: "opus payload type",
                reason: p.payload_type().to_string(),
            });
        }
        let payload = p.payload();
        let info = packet_info(payload)?;
        let new_stream = self.ssrc != Some(p.ssrc());
        if new_stream {
            self.ssrc = Some(p.ssrc());
            self.highest = None;
        }
        let (seq, timestamp) = match self.highest {
            None => (p.sequence_number() as u64, p.timestamp() as u64),
            Some((hs, ht)) => (
                extend(hs, p.sequence_number() as u64, 16),
                extend(ht, p.timestamp() as u64, 32),
            ),
        };
        if self.highest.is_none_or(|(hs, _)| seq > hs) {
            self.highest = Some((seq, timestamp));
        }
        Ok(OpusRtp {
            ssrc: p.ssrc(),
            seq,
            timestamp,
            marker: p.marker(),
            info,
            payload: payload.to_vec(),
            new_stream,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn frame_durations_follow_table_2() {
        // config 1 (SILK NB 20 ms), 13 (hybrid SWB 20 ms), 19 (CELT NB 20 ms), 16 (CELT 2.5).
        assert_eq!(frame_samples(1 << 3), 960);
        assert_eq!(frame_samples(3 << 3), 2880);
        assert_eq!(frame_samples(13 << 3), 960);
        assert_eq!(frame_samples(19 << 3), 960);
        assert_eq!(frame_samples(16 << 3), 120);
        assert_eq!(frame_samples(31 << 3), 960);
    }

    #[test]
    fn packet_rules_r1_to_r7() {
        let toc = 31 << 3; // CELT FB 20 ms
        assert!(packet_info(&[]).is_err(), "R1");
        assert_eq!(packet_info(&[toc, 1, 2, 3]).unwrap().samples, 960);
        assert!(
            packet_info(&[toc | 1, 1, 2, 3]).is_err(),
            "R3: odd code-1 payload"
        );
        assert_eq!(packet_info(&[toc | 1, 1, 2]).unwrap().frames, 2);
        // Code 2: first frame 2 bytes, second 1.
        assert_eq!(packet_info(&[toc | 2, 2, 9, 9, 9]).unwrap().samples, 1920);
        assert!(packet_info(&[toc | 2, 5, 9]).is_err(), "R4");
        // Code 3 CBR, 3 frames of 2 bytes.
        assert_eq!(
            packet_info(&[toc | 3, 3, 1, 2, 3, 4, 5, 6]).unwrap().frames,
            3
        );
        assert!(packet_info(&[toc | 3, 3, 1, 2, 3, 4, 5]).is_err(), "R5");
        assert!(packet_info(&[toc | 3, 0]).is_err(), "zero frames");
        // 7 frames of 20 ms = 140 ms > 120 ms.
        assert!(
            packet_info(&[toc | 3, 7, 0, 0, 0, 0, 0, 0, 0]).is_err(),
            "R5: over 120 ms"
        );
        // Code 3 VBR with padding: 2 frames, first 1 byte, 2 bytes of padding.
        assert_eq!(
            packet_info(&[toc | 3, 0x80 | 0x40 | 2, 2, 1, 7, 8, 8, 0, 0])
                .unwrap()
                .frames,
            2
        );
        assert!(
            packet_info(&[toc | 3, 0x40 | 1, 200]).is_err(),
            "R7: padding too long"
        );
        assert!(packet_info(&vec![toc; 1277]).is_err(), "R2");
    }

    #[test]
    fn packetize_then_depacketize() {
        let mut p = OpusPacketizer::new(111, 0xabcd, 65534);
        let mut d = OpusDepacketizer::new(111);
        let payload = [31u8 << 3, 1, 2, 3];
        let mut ts = u32::MAX - 960; // wraps after the second packet
        let mut got = Vec::new();
        for i in 0..4 {
            let pkt = p.packetize(&payload, ts).unwrap();
            let r = d.depacketize(&pkt).unwrap();
            assert_eq!(r.marker, i == 0);
            assert_eq!(r.payload, payload);
            got.push((r.seq, r.timestamp));
            ts = ts.wrapping_add(960);
        }
        assert_eq!(got[0], (65534, (u32::MAX - 960) as u64));
        assert_eq!(got[2], (65536, (1u64 << 32) + 959));
        assert_eq!(got[3].0, 65537);
        // Wrong payload type, invalid Opus, not RTP: refused.
        let bad = RtpHeader {
            payload_type: 96,
            ..Default::default()
        }
        .to_vec(&payload)
        .unwrap();
        assert!(d.depacketize(&bad).is_err());
        let empty = RtpHeader {
            payload_type: 111,
            ssrc: 0xabcd,
            ..Default::default()
        }
        .to_vec(&[])
        .unwrap();
        assert!(d.depacketize(&empty).is_err());
        assert!(d.depacketize(&[0x80]).is_err());
        assert!(p.packetize(&[], 0).is_err());
        // A late packet from before the wrap is extended backwards, not forwards.
        let mut late = OpusPacketizer::new(111, 0xabcd, 65535);
        let r = d
            .depacketize(&late.packetize(&payload, u32::MAX).unwrap())
            .unwrap();
        assert_eq!((r.seq, r.timestamp), (65535, u32::MAX as u64));
    }

    #[test]
    fn new_ssrc_restarts_the_stream() {
        let mut d = OpusDepacketizer::new(111);
        let mut a = OpusPacketizer::new(111, 1, 100);
        let mut b = OpusPacketizer::new(111, 2, 5);
        let pl = [31u8 << 3, 0];
        assert!(
            d.depacketize(&a.packetize(&pl, 0).unwrap())
                .unwrap()
                .new_stream
        );
        assert!(
            !d.depacketize(&a.packetize(&pl, 960).unwrap())
                .unwrap()
                .new_stream
        );
        let r = d.depacketize(&b.packetize(&pl, 7).unwrap()).unwrap();
        assert!(r.new_stream);
        assert_eq!((r.seq, r.timestamp), (5, 7));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..1600)) {
            let _ = packet_info(&data);
            let mut d = OpusDepacketizer::new(111);
            let _ = d.depacketize(&data);
        }

        #[test]
        fn extension_is_monotone_within_half_range(start in any::<u16>(), steps in proptest::collection::vec(0u16..1000, 1..50)) {
            let mut p = OpusPacketizer::new(111, 9, start);
            let mut d = OpusDepacketizer::new(111);
            let mut last = None;
            let mut ts = 0u32;
            for s in steps {
                for _ in 0..s.min(3) {
                    let _ = p.packetize(&[31 << 3, 0], ts);
                }
                ts = ts.wrapping_add(960 * s as u32);
                let r = d.depacketize(&p.packetize(&[31 << 3, 0], ts).unwrap()).unwrap();
                if let Some(l) = last {
                    prop_assert!(r.seq > l);
                }
                last = Some(r.seq);
            }
        }
    }
}
