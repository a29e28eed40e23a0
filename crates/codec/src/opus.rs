//! Opus over RTP (RFC 7587): a packetizer and a depacketizer, and (feature `opus`) the libopus
//! encoder and decoder with the settings Layercast uses.
//!
//! One Opus packet per RTP packet, no payload header (RFC 7587 §4.2); the RTP clock is always
//! 48 kHz whatever the coded bandwidth (§4.1), and the marker bit is set on the first packet of
//! a talkspurt (here: the first packet of a stream and the first after a discontinuity). The
//! depacketizer checks the RTP header and the Opus packet's own framing (RFC 6716 §3.4,
//! requirements R1-R7) so that a malformed packet is refused before it reaches the decoder, and
//! extends sequence numbers and timestamps to 64 bits for the jitter buffer.

use crate::error::{Error, Result};
use crate::rtp::{RtpHeader, RtpPacket};

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
        [] => Err(Error::BadBitstream("opus: frame length missing")),
        [x, ..] if *x < 252 => Ok((*x as usize, 1)),
        [x, y, ..] => Ok((*y as usize * 4 + *x as usize, 2)),
        [_] => Err(Error::BadBitstream("opus: frame length truncated")),
    }
}

/// Checks an Opus packet's framing (RFC 6716 §3.4) and says how long it is.
pub fn packet_info(p: &[u8]) -> Result<PacketInfo> {
    // R1: at least one byte.
    let (&toc, rest) = p
        .split_first()
        .ok_or(Error::BadBitstream("opus: empty packet"))?;
    if p.len() > MAX_PACKET_BYTES {
        return Err(Error::BadBitstream("opus: packet too long"));
    }
    let fs = frame_samples(toc);
    let stereo = toc & 0x04 != 0;
    let frames = match toc & 3 {
        // Code 0: one frame; R2: at most 1275 bytes.
        0 => {
            if rest.len() > 1275 {
                return Err(Error::BadBitstream("opus: frame over 1275 bytes"));
            }
            1
        }
        // Code 1: two frames of equal size; R3: odd payload length is invalid.
        1 => {
            if rest.len() % 2 != 0 || rest.len() / 2 > 1275 {
                return Err(Error::BadBitstream("opus: code 1 with unequal frames"));
            }
            2
        }
        // Code 2: two frames, the first's length coded; R4.
        2 => {
            let (n1, used) = frame_len(rest)?;
            let left = rest.len() - used;
            if n1 > left || n1 > 1275 || left - n1 > 1275 {
                return Err(Error::BadBitstream("opus: code 2 frame length"));
            }
            2
        }
        // Code 3: a frame count byte; R5-R7.
        _ => {
            let (&fc, mut body) = rest
                .split_first()
                .ok_or(Error::BadBitstream("opus: code 3 without frame count"))?;
            let m = (fc & 0x3f) as u32;
            if m == 0 || m * fs > MAX_PACKET_SAMPLES {
                return Err(Error::BadBitstream("opus: code 3 frame count"));
            }
            let vbr = fc & 0x80 != 0;
            // Padding (§3.2.5): a run of length bytes, 255 meaning 254 more and continue.
            let mut pad = 0usize;
            if fc & 0x40 != 0 {
                loop {
                    let (&b, r) = body
                        .split_first()
                        .ok_or(Error::BadBitstream("opus: padding length truncated"))?;
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
                .ok_or(Error::BadBitstream("opus: padding longer than the packet"))?;
            if vbr {
                let mut coded = 0usize;
                let mut b = body;
                for _ in 0..m - 1 {
                    let (n, used) = frame_len(b)?;
                    b = &b[used..];
                    avail = avail
                        .checked_sub(used)
                        .ok_or(Error::BadBitstream("opus: frame lengths truncated"))?;
                    if n > 1275 {
                        return Err(Error::BadBitstream("opus: frame over 1275 bytes"));
                    }
                    coded += n;
                }
                // R6: the coded lengths fit, and the last frame is at most 1275 bytes.
                if coded > avail || avail - coded > 1275 {
                    return Err(Error::BadBitstream("opus: VBR frame lengths"));
                }
            } else if avail % m as usize != 0 || avail / m as usize > 1275 {
                // R5: CBR frames divide the payload evenly.
                return Err(Error::BadBitstream("opus: CBR frames of unequal length"));
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
            return Err(Error::OutOfRange {
                field: "opus payload type",
                value: p.payload_type() as u64,
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

#[cfg(feature = "opus")]
pub use self::libopus::{Decoder, Encoder, EncoderConfig};

#[cfg(feature = "opus")]
mod libopus {
    use super::FRAME_20MS;
    use crate::error::{Error, Result};

    fn oerr(call: &'static str) -> impl Fn(opus::Error) -> Error {
        move |e| Error::Config(format!("libopus {call}: {e}"))
    }

    /// The encoder settings of a Layercast audio track.
    #[derive(Clone, Debug, PartialEq)]
    pub struct EncoderConfig {
        /// 1 or 2.
        pub channels: u8,
        /// Target bit rate of the Opus payload, bit/s (32 000..=128 000).
        pub bitrate: u32,
        /// In-band FEC (LBRR): each packet also carries a coarse copy of the previous one.
        pub inband_fec: bool,
        /// The loss rate the encoder plans its FEC for, percent (libopus only adds LBRR
        /// when this is above zero).
        pub expected_loss_pct: u8,
    }

    impl Default for EncoderConfig {
        fn default() -> Self {
            EncoderConfig {
                channels: 2,
                bitrate: 64_000,
                inband_fec: true,
                expected_loss_pct: 10,
            }
        }
    }

    /// libopus encoder, 48 kHz, 20-ms frames, constant bit rate.
    ///
    /// Constant bit rate: every packet of a stream then has the same size, so the audio
    /// stream is itself constant-rate like the layers it rides with, and its announced rate
    /// is exact (docs/protocols/audio.md).
    pub struct Encoder {
        enc: opus::Encoder,
        channels: usize,
        out: Vec<u8>,
    }

    impl Encoder {
        pub fn new(c: &EncoderConfig) -> Result<Encoder> {
            let ch = match c.channels {
                1 => opus::Channels::Mono,
                2 => opus::Channels::Stereo,
                n => return Err(Error::Config(format!("opus: {n} channels, need 1 or 2"))),
            };
            if !(6_000..=510_000).contains(&c.bitrate) {
                return Err(Error::Config(format!(
                    "opus: bit rate {} outside 6000..=510000",
                    c.bitrate
                )));
            }
            let mut enc = opus::Encoder::new(48_000, ch, opus::Application::Audio)
                .map_err(oerr("encoder_create"))?;
            enc.set_bitrate(opus::Bitrate::Bits(c.bitrate as i32))
                .map_err(oerr("SET_BITRATE"))?;
            enc.set_vbr(false).map_err(oerr("SET_VBR"))?;
            enc.set_inband_fec(c.inband_fec)
                .map_err(oerr("SET_INBAND_FEC"))?;
            enc.set_packet_loss_perc(c.expected_loss_pct.min(100) as i32)
                .map_err(oerr("SET_PACKET_LOSS_PERC"))?;
            Ok(Encoder {
                enc,
                channels: c.channels as usize,
                out: vec![0; 1500],
            })
        }

        /// The encoder's look-ahead in samples at 48 kHz: the decoder's output lags the
        /// encoder's input by this much.
        pub fn lookahead(&mut self) -> Result<u32> {
            Ok(self
                .enc
                .get_lookahead()
                .map_err(oerr("GET_LOOKAHEAD"))?
                .max(0) as u32)
        }

        /// Interleaved samples of one 20-ms frame.
        pub fn frame_len(&self) -> usize {
            FRAME_20MS as usize * self.channels
        }

        /// Encodes one 20-ms frame of interleaved 16-bit samples into an Opus packet.
        pub fn encode(&mut self, pcm: &[i16]) -> Result<Vec<u8>> {
            if pcm.len() != self.frame_len() {
                return Err(Error::Config(format!(
                    "opus: frame of {} samples, expected {}",
                    pcm.len(),
                    self.frame_len()
                )));
            }
            let n = self
                .enc
                .encode(pcm, &mut self.out)
                .map_err(oerr("encode"))?;
            Ok(self.out[..n].to_vec())
        }
    }

    /// libopus decoder at 48 kHz with loss concealment and in-band FEC.
    pub struct Decoder {
        dec: opus::Decoder,
        channels: usize,
    }

    impl Decoder {
        pub fn new(channels: u8) -> Result<Decoder> {
            let ch = match channels {
                1 => opus::Channels::Mono,
                2 => opus::Channels::Stereo,
                n => return Err(Error::Config(format!("opus: {n} channels, need 1 or 2"))),
            };
            Ok(Decoder {
                dec: opus::Decoder::new(48_000, ch).map_err(oerr("decoder_create"))?,
                channels: channels as usize,
            })
        }

        pub fn channels(&self) -> usize {
            self.channels
        }

        /// Decodes a packet into `out` (interleaved); returns samples per channel.
        pub fn decode(&mut self, packet: &[u8], out: &mut Vec<i16>) -> Result<usize> {
            self.run(packet, out, MAX_SAMPLES, false)
        }

        /// Recovers the `samples` before `next_packet` from its in-band FEC (LBRR) data; if
        /// the packet carries none, libopus conceals them instead.
        pub fn decode_fec(
            &mut self,
            next_packet: &[u8],
            samples: usize,
            out: &mut Vec<i16>,
        ) -> Result<usize> {
            self.run(next_packet, out, samples, true)
        }

        /// Conceals `samples` lost samples (libopus PLC).
        pub fn conceal(&mut self, samples: usize, out: &mut Vec<i16>) -> Result<usize> {
            self.run(&[], out, samples, false)
        }

        fn run(
            &mut self,
            p: &[u8],
            out: &mut Vec<i16>,
            samples: usize,
            fec: bool,
        ) -> Result<usize> {
            let start = out.len();
            out.resize(start + samples * self.channels, 0);
            match self.dec.decode(p, &mut out[start..], fec) {
                Ok(n) => {
                    out.truncate(start + n * self.channels);
                    Ok(n)
                }
                Err(e) => {
                    out.truncate(start);
                    Err(oerr("decode")(e))
                }
            }
        }
    }

    /// Largest decode (120 ms at 48 kHz).
    const MAX_SAMPLES: usize = super::MAX_PACKET_SAMPLES as usize;
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

#[cfg(all(test, feature = "opus"))]
mod codec_tests {
    use super::*;

    /// Frequency of frame `f` of the test signal: a new note every 20 ms, so concealment
    /// (which extrapolates the previous frame) cannot guess a lost frame's note.
    fn note(f: usize) -> f64 {
        [330.0, 523.0, 392.0, 698.0, 440.0, 587.0, 262.0][f % 7]
    }

    /// Interleaved stereo frames of the notes.
    fn notes(n_frames: usize) -> Vec<Vec<i16>> {
        let mut phase = 0.0f64;
        (0..n_frames)
            .map(|f| {
                (0..960)
                    .flat_map(|_| {
                        phase += 2.0 * std::f64::consts::PI * note(f) / 48_000.0;
                        let v = (9000.0 * phase.sin()) as i16;
                        [v, v]
                    })
                    .collect()
            })
            .collect()
    }

    /// Amplitude of frequency `hz` in the left channel of an interleaved stereo frame
    /// (Goertzel), skipping the first 5 ms (the decoder's cross-fade).
    fn level(frame: &[i16], hz: f64) -> f64 {
        let x: Vec<f64> = frame
            .iter()
            .step_by(2)
            .skip(240)
            .map(|&v| v as f64)
            .collect();
        let w = 2.0 * std::f64::consts::PI * hz / 48_000.0;
        let (mut s1, mut s2) = (0.0, 0.0);
        for v in &x {
            let s = v + 2.0 * w.cos() * s1 - s2;
            s2 = s1;
            s1 = s;
        }
        (s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2).sqrt() / x.len() as f64
    }

    /// Constant bit rate gives equal packets at the configured rate; a lost packet recovered
    /// from the next packet's in-band FEC has its own note, which concealment alone (an
    /// extrapolation of the frame before) does not: so the encoder really carries LBRR at
    /// this setting and `decode_fec` uses it.
    #[test]
    fn cbr_packets_and_fec_beats_concealment() {
        let cfg = EncoderConfig::default();
        let mut enc = Encoder::new(&cfg).unwrap();
        let frames = notes(150);
        let pkts: Vec<Vec<u8>> = frames.iter().map(|f| enc.encode(f).unwrap()).collect();
        let sizes: std::collections::BTreeSet<usize> = pkts[5..].iter().map(Vec::len).collect();
        assert_eq!(
            sizes.into_iter().collect::<Vec<_>>(),
            vec![160],
            "64 kbit/s CBR = 160 B"
        );
        for p in &pkts {
            assert_eq!(packet_info(p).unwrap().samples, 960);
        }
        let lost = |i: usize| i >= 20 && i % 10 == 3;
        let decode_all = |mode: u8| -> Vec<i16> {
            let mut d = Decoder::new(2).unwrap();
            let mut out = Vec::new();
            for (i, p) in pkts.iter().enumerate() {
                if !lost(i) || mode == 0 {
                    d.decode(p, &mut out).unwrap();
                } else if mode == 1 {
                    d.conceal(960, &mut out).unwrap();
                } else {
                    d.decode_fec(&pkts[i + 1], 960, &mut out).unwrap();
                }
            }
            out
        };
        let clean = decode_all(0);
        let plc = decode_all(1);
        let fec = decode_all(2);
        assert_eq!(clean.len(), 150 * 960 * 2);
        assert_eq!(plc.len(), clean.len());
        assert_eq!(fec.len(), clean.len());
        // The decoder's output lags the input by its look-ahead (6.5 ms at most), well inside
        // the 15 ms measured per frame.
        let (mut ok_fec, mut ok_plc, mut n) = (0, 0, 0);
        for i in (0..149).filter(|&i| lost(i)) {
            let want = level(&clean[i * 1920..(i + 1) * 1920], note(i));
            let f = level(&fec[i * 1920..(i + 1) * 1920], note(i));
            let c = level(&plc[i * 1920..(i + 1) * 1920], note(i));
            n += 1;
            ok_fec += usize::from(f > 0.5 * want);
            ok_plc += usize::from(c > 0.5 * want);
        }
        assert!(
            ok_fec >= n * 3 / 4,
            "FEC kept the note in {ok_fec} of {n} lost frames"
        );
        assert!(
            ok_plc <= n / 4,
            "PLC kept the note in {ok_plc} of {n} lost frames"
        );
    }

    #[test]
    fn bad_settings_and_garbage_are_errors() {
        let c = EncoderConfig {
            channels: 3,
            ..Default::default()
        };
        assert!(Encoder::new(&c).is_err());
        let c = EncoderConfig {
            channels: 1,
            bitrate: 1,
            ..Default::default()
        };
        assert!(Encoder::new(&c).is_err());
        let mut e = Encoder::new(&EncoderConfig::default()).unwrap();
        assert!(e.encode(&[0; 10]).is_err());
        let mut d = Decoder::new(2).unwrap();
        let mut out = Vec::new();
        // A TOC claiming code 3 with a zero frame count: libopus refuses, no panic.
        assert!(d.decode(&[0xfb, 0x00], &mut out).is_err());
        assert!(out.is_empty());
    }
}
