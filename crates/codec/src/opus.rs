//! Opus: the RTP payload format (RFC 7587, `proto::opus`, re-exported here) and (feature
//! `opus`) the libopus encoder and decoder with the settings Layercast uses.

pub use proto::opus::*;

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
