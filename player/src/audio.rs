//! The audio path's codec and output: the frames the session's audio track plays
//! (`session::audio`: repair, jitter buffer, playout clock, loss tally) are decoded here with
//! libopus (the frame's packet, the next packet's in-band FEC, or concealment) and go to the
//! speaker (`autoaudiosink`, window build) and/or headless files: `DIR/audio.wav` (what
//! played, sample-exact in time) and `DIR/audio.csv` (one row per 20-ms frame played, one per
//! refused packet).
//!
//! Audio is the master clock (docs/player.md "Audio and lip sync"): the track's playout names
//! the local time of its next frame and that frame's RTP time; with the stream's RTCP sender
//! report ([`SrMap`]) that gives [`AudioClock`], where a capture time plays, which the video
//! path schedules its pictures against.

use codec::opus::{Decoder, FRAME_20MS};
use codec::rtcp::{parse_sender_reports, unix_ns_from_ntp};
use session::audio::{AudioStats, FrameSource, PlayFrame, Refusal};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// Nanoseconds of one 20-ms frame.
const FRAME_NS: u64 = session::audio::playout::FRAME_NS;
/// The audio's starting playout delay when `--playout-delay-ms` is not given, ms (after its
/// first packet's arrival). The video follows the audio, so this is the session's latency
/// while the video's own buffer needs no more; when it needs more, the player raises the
/// audio's delay, and lowers it again (never below the start) when it needs less. 800 rather
/// than the ~250 a clean path needs because a queue that builds mid-session faster than the
/// delay can follow (the switch test's 0.5 s) costs a smaller start an audio gap
/// (docs/protocols/audio.md "Playout delay").
pub const DEFAULT_DELAY_MS: u64 = 800;

/// The NTP ↔ RTP mapping of one stream from its latest RTCP sender report, in the sender's
/// Unix time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrMap {
    pub capture_ns: u64,
    pub rtp: u32,
    pub rate: u32,
}

impl SrMap {
    /// The sender's capture time of RTP time `rtp` (within ±half the RTP range of the report).
    pub fn capture_of(&self, rtp: u32) -> u64 {
        let d = rtp.wrapping_sub(self.rtp) as i32 as i64;
        (self.capture_ns as i64 + d * 1_000_000_000 / self.rate as i64).max(0) as u64
    }

    /// The mapping in the first sender report of `ssrc` in a compound RTCP packet.
    pub fn from_rtcp(buf: &[u8], ssrc: Option<u32>, rate: u32) -> Option<SrMap> {
        parse_sender_reports(buf)
            .ok()?
            .into_iter()
            .find(|s| ssrc.is_none_or(|x| x == s.ssrc))
            .map(|s| SrMap {
                capture_ns: unix_ns_from_ntp(s.ntp),
                rtp: s.rtp_ts,
                rate,
            })
    }
}

/// Where a sender capture time plays locally: `local = capture + offset_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AudioClock {
    pub offset_ns: i64,
}

impl AudioClock {
    pub fn play_time(&self, capture_ns: u64) -> u64 {
        (capture_ns as i64 + self.offset_ns).max(0) as u64
    }
}

/// What [`Audio::play`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Played {
    /// False: the decoder failed on the frame (it was concealed instead).
    pub ok: bool,
    /// Samples per channel cut out of it (at most its `may_cut`).
    pub cut: usize,
}

/// Options of the audio output.
pub struct AudioOptions<'a> {
    /// Headless files `audio.wav` and `audio.csv` in this directory.
    pub out: Option<&'a Path>,
    /// Play through `autoaudiosink`.
    pub speaker: bool,
}

/// The decoder and outputs of one session's audio track.
pub struct Audio {
    dec: Decoder,
    channels: usize,
    ssrc: Option<u32>,
    sr: Option<SrMap>,
    pub sender_reports: u64,
    out: Output,
    /// Sum of squares and count of the samples of the current second (level meter).
    level: (f64, u64),
    last_level_db: f64,
    pcm: Vec<i16>,
}

/// Where decoded audio goes.
#[derive(Default)]
struct Output {
    wav: Option<WavWriter>,
    csv: Option<std::io::BufWriter<std::fs::File>>,
    speaker: Option<Speaker>,
}

impl Audio {
    /// The audio path of an Opus track, or `None` if the track is not Opus.
    /// `prev` carries the output files and speaker over a session change.
    pub fn new(track: &proto::Track, o: &AudioOptions<'_>, prev: Option<Audio>) -> Option<Audio> {
        let proto::Codec::Opus(p) = &track.codec else {
            return None;
        };
        let channels = p.channels.clamp(1, 2);
        let dec = Decoder::new(channels).ok()?;
        let mut out = match prev {
            Some(mut a) if a.channels == channels as usize => std::mem::take(&mut a.out),
            _ => Output::default(),
        };
        if let (None, Some(dir)) = (&out.wav, o.out) {
            match WavWriter::create(&dir.join("audio.wav"), channels as u16) {
                Ok(w) => out.wav = Some(w),
                Err(e) => eprintln!("layercast-player: audio.wav: {e}"),
            }
            if let Ok(f) = std::fs::File::create(dir.join("audio.csv")) {
                let mut f = std::io::BufWriter::new(f);
                let _ = writeln!(f, "{CSV_HEADER}");
                out.csv = Some(f);
            }
        }
        if out.speaker.is_none() && o.speaker {
            match Speaker::open(channels) {
                Ok(s) => out.speaker = Some(s),
                Err(e) => eprintln!("layercast-player: no speaker ({e})"),
            }
        }
        Some(Audio {
            dec,
            channels: channels as usize,
            ssrc: track.streams.first().map(|s| s.ssrc),
            sr: None,
            sender_reports: 0,
            out,
            level: (0.0, 0),
            last_level_db: f64::NEG_INFINITY,
            pcm: Vec::with_capacity(FRAME_20MS as usize * 2),
        })
    }

    /// One datagram from the stream's RTCP port: its sender report gives the audio clock's
    /// capture-time mapping.
    pub fn push_rtcp(&mut self, datagram: &[u8]) {
        if let Some(m) = SrMap::from_rtcp(datagram, self.ssrc, 48_000) {
            self.sr = Some(m);
            self.sender_reports += 1;
        }
    }

    /// A new sender instance: its clock mapping comes with its own reports.
    pub fn forget_sender_report(&mut self) {
        self.sr = None;
    }

    /// Where a sender capture time plays, given the playout's next frame (local ns, RTP time;
    /// `session::audio::AudioReceive::anchor`): needs a sender report and a running stream.
    pub fn clock(&self, anchor: Option<(u64, u64)>) -> Option<AudioClock> {
        let (local, ts) = anchor?;
        let cap = self.sr?.capture_of(ts as u32);
        Some(AudioClock {
            offset_ns: local as i64 - cap as i64,
        })
    }

    /// Level of the last second, dBFS (overlay).
    pub fn level_db(&self) -> f64 {
        self.last_level_db
    }

    /// Decodes and plays frame `f`, cut short by up to its `may_cut` samples where that is
    /// not heard (`session::audio::stretch`). The caller tells the track what was cut and
    /// whether the decoder failed on the frame (concealed instead).
    pub fn play(&mut self, f: &PlayFrame) -> Played {
        self.pcm.clear();
        let n = FRAME_20MS as usize;
        let (status, arrival, seq, ok) = match &f.source {
            FrameSource::Packet {
                payload,
                seq,
                arrival_ns,
            } => match self.dec.decode(payload, &mut self.pcm) {
                Ok(_) => ("decoded", Some(*arrival_ns), Some(*seq), true),
                Err(_) => {
                    let _ = self.dec.conceal(n, &mut self.pcm);
                    ("decode_error", Some(*arrival_ns), Some(*seq), false)
                }
            },
            FrameSource::Fec { next_payload } => {
                match self.dec.decode_fec(next_payload, n, &mut self.pcm) {
                    Ok(_) => ("fec", None, None, true),
                    Err(_) => ("decode_error", None, None, false),
                }
            }
            FrameSource::Conceal => {
                let _ = self.dec.conceal(n, &mut self.pcm);
                ("concealed", None, None, true)
            }
            FrameSource::Silence => ("silence", None, None, true),
        };
        self.pcm.resize(n * self.channels, 0);
        let cut = match f.may_cut {
            0 => 0,
            m => session::audio::stretch::shorten(&mut self.pcm, self.channels, m),
        };
        for &s in &self.pcm {
            self.level.0 += (s as f64 / 32768.0).powi(2);
        }
        self.level.1 += self.pcm.len() as u64;
        if self.level.1 >= 48_000 * self.channels as u64 {
            self.last_level_db = 10.0 * (self.level.0 / self.level.1 as f64).max(1e-10).log10();
            self.level = (0.0, 0);
        }
        let t = f.at_ns;
        let capture = self.sr.map(|m| m.capture_of(f.rtp_ts as u32));
        let wav_sample = self.out.wav.as_mut().map(|w| w.write_at(t, &self.pcm));
        if let Some(c) = self.out.csv.as_mut() {
            let _ = writeln!(
                c,
                "{},{},{},{},{},{},{}",
                f.rtp_ts,
                seq.map_or(String::new(), |s| s.to_string()),
                t,
                wav_sample.map_or(String::new(), |s| s.to_string()),
                status,
                arrival.map_or(String::new(), |a| a.to_string()),
                capture.map_or(String::new(), |c| c.to_string()),
            );
        }
        if let Some(s) = self.out.speaker.as_mut() {
            s.play(t, &self.pcm);
        }
        Played { ok, cut }
    }

    /// A packet the track refused (a row of `audio.csv`).
    pub fn refused(&mut self, recv_ns: u64, why: Refusal) {
        if let Some(c) = self.out.csv.as_mut() {
            let _ = writeln!(c, ",,,,{},{recv_ns},", why.as_str());
        }
    }

    /// Once a second: flush the files (they are read while the player runs).
    pub fn flush(&mut self) {
        if let Some(c) = self.out.csv.as_mut() {
            let _ = c.flush();
        }
        if let Some(w) = self.out.wav.as_mut() {
            let _ = w.finish_header();
        }
    }

    /// The track's counters and this path's as JSON (per-second log, telemetry).
    pub fn json(&self, s: &AudioStats) -> serde_json::Value {
        let mut j = serde_json::to_value(s).unwrap_or_default();
        j["sender_reports"] = serde_json::json!(self.sender_reports);
        j["level_db"] = serde_json::json!(if self.last_level_db.is_finite() {
            Some(self.last_level_db)
        } else {
            None
        });
        j
    }

    /// `/metrics` lines (`lab` = `{viewer="..."}`).
    pub fn metrics(s: &AudioStats, lab: &str) -> String {
        let p = &s.playout;
        let mut m = String::new();
        for (name, v) in [
            ("layercast_player_audio_packets_total", p.packets),
            ("layercast_player_audio_lost_total", p.lost),
            ("layercast_player_audio_fec_recovered_total", p.fec),
            ("layercast_player_audio_concealed_frames_total", p.concealed),
            (
                "layercast_player_audio_concealment_events_total",
                p.concealment_events,
            ),
            ("layercast_player_audio_late_total", p.late),
            ("layercast_player_audio_malformed_total", p.malformed),
            ("layercast_player_audio_underruns_total", p.underruns),
            ("layercast_player_audio_delay_raises_total", p.delay_raises),
            (
                "layercast_player_audio_shortened_frames_total",
                p.shortened_frames,
            ),
        ] {
            m.push_str(&format!("# TYPE {name} counter\n{name}{lab} {v}\n"));
        }
        let name = "layercast_player_audio_delay_seconds";
        let d = p.delay_ms as f64 / 1e3;
        m.push_str(&format!("# TYPE {name} gauge\n{name}{lab} {d}\n"));
        m
    }
}

/// The header of `audio.csv`: one row per 20-ms frame played (`status` decoded, fec,
/// concealed, silence, decode_error) and one per refused packet (late, duplicate, malformed:
/// only `status` and `arrival_unix_ns` set).
pub const CSV_HEADER: &str =
    "rtp_ts,seq,play_unix_ns,wav_sample,status,arrival_unix_ns,capture_unix_ns";

impl Drop for Audio {
    fn drop(&mut self) {
        self.flush();
    }
}

/// A 16-bit PCM WAV file whose sample `i` is what played at `start + i / 48 kHz`: gaps in the
/// output (the stream stopped) are written as silence, so the file is a time line.
struct WavWriter {
    f: std::io::BufWriter<std::fs::File>,
    channels: u16,
    /// Local time of sample 0.
    start: Option<u64>,
    samples: u64,
}

impl WavWriter {
    fn create(path: &Path, channels: u16) -> std::io::Result<WavWriter> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        f.write_all(&wav_header(channels, 0))?;
        Ok(WavWriter {
            f,
            channels,
            start: None,
            samples: 0,
        })
    }

    /// Writes `pcm` to play at local time `t`; returns the sample index of its first sample.
    fn write_at(&mut self, t: u64, pcm: &[i16]) -> u64 {
        let start = *self.start.get_or_insert(t);
        let want = (t.saturating_sub(start) as u128 * 48_000 / 1_000_000_000) as u64;
        if want > self.samples {
            // The output paused: silence up to `t`, so the file stays a time line.
            let gap = ((want - self.samples) * self.channels as u64) as usize;
            let _ = self.f.write_all(&vec![0u8; gap * 2]);
            self.samples = want;
        }
        let at = self.samples;
        let bytes: Vec<u8> = pcm.iter().flat_map(|s| s.to_le_bytes()).collect();
        let _ = self.f.write_all(&bytes);
        self.samples += (pcm.len() / self.channels as usize) as u64;
        at
    }

    /// Writes the current data size into the header (the file stays playable while open).
    fn finish_header(&mut self) -> std::io::Result<()> {
        self.f.flush()?;
        let bytes = (self.samples * 2 * self.channels as u64).min(u32::MAX as u64 - 36) as u32;
        let f = self.f.get_mut();
        f.seek(SeekFrom::Start(0))?;
        f.write_all(&wav_header(self.channels, bytes))?;
        f.seek(SeekFrom::End(0))?;
        Ok(())
    }
}

/// The 44-byte header of a 48-kHz 16-bit PCM WAV file with `data_bytes` of samples.
fn wav_header(ch: u16, data_bytes: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(44);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&(36 + data_bytes).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&ch.to_le_bytes());
    h.extend_from_slice(&48_000u32.to_le_bytes());
    h.extend_from_slice(&(48_000 * 2 * ch as u32).to_le_bytes());
    h.extend_from_slice(&(2 * ch).to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&data_bytes.to_le_bytes());
    h
}

/// The speaker: `appsrc ! audioconvert ! audioresample ! autoaudiosink`, fed each frame
/// with a timestamp on the pipeline clock equal to its play time.
struct Speaker {
    pipeline: gstreamer::Pipeline,
    src: gstreamer_app::AppSrc,
    /// Local Unix ns of the pipeline clock's base time.
    base_unix: Option<u64>,
}

impl Speaker {
    fn open(channels: u8) -> Result<Speaker, String> {
        use gstreamer as gst;
        use gstreamer::prelude::*;
        gst::init().map_err(|e| e.to_string())?;
        let caps = gst::Caps::builder("audio/x-raw")
            .field("format", "S16LE")
            .field("rate", 48_000i32)
            .field("channels", channels as i32)
            .field("layout", "interleaved")
            .build();
        let src = gstreamer_app::AppSrc::builder()
            .caps(&caps)
            .format(gst::Format::Time)
            .is_live(true)
            .build();
        let make = |f: &str| {
            gst::ElementFactory::make(f)
                .build()
                .map_err(|e| e.to_string())
        };
        let (conv, res, sink) = (
            make("audioconvert")?,
            make("audioresample")?,
            make("autoaudiosink")?,
        );
        let pipeline = gst::Pipeline::new();
        pipeline
            .add_many([src.upcast_ref(), &conv, &res, &sink])
            .map_err(|e| e.to_string())?;
        gst::Element::link_many([src.upcast_ref(), &conv, &res, &sink])
            .map_err(|e| e.to_string())?;
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| format!("starting the speaker: {e}"))?;
        Ok(Speaker {
            pipeline,
            src,
            base_unix: None,
        })
    }

    fn play(&mut self, t: u64, pcm: &[i16]) {
        use gstreamer as gst;
        use gstreamer::prelude::*;
        let base = *self.base_unix.get_or_insert_with(|| {
            let now = crate::net::realtime_ns();
            match (self.pipeline.clock(), self.pipeline.base_time()) {
                (Some(c), Some(b)) => {
                    now.saturating_sub(c.time().nseconds().saturating_sub(b.nseconds()))
                }
                _ => now,
            }
        });
        let bytes: Vec<u8> = pcm.iter().flat_map(|s| s.to_le_bytes()).collect();
        let mut buf = gst::Buffer::from_mut_slice(bytes);
        if let Some(b) = buf.get_mut() {
            b.set_pts(gst::ClockTime::from_nseconds(t.saturating_sub(base)));
            b.set_duration(gst::ClockTime::from_nseconds(FRAME_NS));
        }
        let _ = self.src.push_buffer(buf);
    }
}

impl Drop for Speaker {
    fn drop(&mut self) {
        use gstreamer::prelude::*;
        let _ = self.pipeline.set_state(gstreamer::State::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codec::opus::{Encoder, EncoderConfig, OpusPacketizer};
    use session::audio::{AudioLayout, AudioOutput, AudioReceive};

    const MS: u64 = 1_000_000;

    fn track() -> proto::Track {
        proto::Track {
            id: 1,
            kind: proto::TrackKind::Audio,
            codec: proto::Codec::Opus(proto::OpusParams {
                payload_type: 111,
                channels: 2,
                frame_ms: 20,
                inband_fec: true,
            }),
            streams: vec![proto::Stream {
                layer: 0,
                spatial: 0,
                temporal: 0,
                group: std::net::Ipv4Addr::new(239, 1, 1, 1),
                port: 5000,
                ssrc: 42,
                rate_bps: 68_800,
                repair: None,
            }],
        }
    }

    fn new() -> Audio {
        Audio::new(
            &track(),
            &AudioOptions {
                out: None,
                speaker: false,
            },
            None,
        )
        .unwrap()
    }

    /// `n` RTP packets of a 440-Hz tone (libopus, in-band FEC), 20 ms each, from RTP time `ts0`.
    fn packets(n: usize, ts0: u32) -> Vec<Vec<u8>> {
        let mut enc = Encoder::new(&EncoderConfig::default()).unwrap();
        let mut pk = OpusPacketizer::new(111, 42, 1000);
        (0..n)
            .map(|f| {
                let pcm: Vec<i16> = (0..960)
                    .flat_map(|i| {
                        let t = (f * 960 + i) as f64 / 48_000.0;
                        let v = (8000.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()) as i16;
                        [v, v]
                    })
                    .collect();
                pk.packetize(&enc.encode(&pcm).unwrap(), ts0.wrapping_add(960 * f as u32))
                    .unwrap()
            })
            .collect()
    }

    /// Real Opus packets through the track's playout and this decoder: with isolated losses
    /// and a burst of three, every frame decodes (its packet or the next one's FEC) except the
    /// two the track conceals; no decode error; the level meter hears the tone.
    #[test]
    fn the_track_plays_through_libopus() {
        let layout = AudioLayout::of(&proto::SessionInfo {
            tracks: vec![track()],
            ..proto::SessionInfo::equal_layers(1, 1, std::net::Ipv4Addr::LOCALHOST, 1)
        })
        .unwrap();
        let mut rx = AudioReceive::new(&layout, 60 * MS);
        let mut a = new();
        let pkts = packets(100, 0);
        let t0 = 5_000 * MS;
        let lost = [10usize, 30, 50, 70, 71, 72];
        let mut fails = 0;
        let mut play = |rx: &mut AudioReceive, a: &mut Audio, now: u64| {
            while let Some(o) = rx.poll(now) {
                if let AudioOutput::Play(f) = o {
                    if !a.play(&f).ok {
                        rx.decode_failed(&f);
                        fails += 1;
                    }
                }
            }
        };
        for (i, p) in pkts.iter().enumerate() {
            let t = t0 + i as u64 * 20 * MS;
            play(&mut rx, &mut a, t);
            if !lost.contains(&i) {
                rx.push_media(t, p);
            }
        }
        play(&mut rx, &mut a, t0 + 2040 * MS);
        let s = rx.stats().playout;
        assert_eq!(
            (s.decoded, s.fec, s.concealed, s.lost),
            (94, 4, 2, 6),
            "{s:?}"
        );
        assert_eq!((s.decode_errors, fails), (0, 0));
        assert!(a.level_db() > -40.0, "{}", a.level_db());
    }

    /// A raised delay brought back down by cutting real decoded frames short: a 440-Hz tone
    /// raised by 300 ms for the video and then granted 1 s lower comes down by what its
    /// packets allow (to within one 2.5-ms cut of the start's delay), no frame concealed, and
    /// the file that played has no click where frames were cut (no step between neighbouring
    /// samples larger than the tone's own before the raise) and is a time line (as long as
    /// the time it covers).
    #[test]
    fn a_lowered_delay_cuts_the_tone_without_a_click() {
        let dir = std::env::temp_dir().join(format!("lc-cut-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let layout = AudioLayout::of(&proto::SessionInfo {
            tracks: vec![track()],
            ..proto::SessionInfo::equal_layers(1, 1, std::net::Ipv4Addr::LOCALHOST, 1)
        })
        .unwrap();
        let mut rx = AudioReceive::new(&layout, 100 * MS);
        let o = AudioOptions {
            out: Some(&dir),
            speaker: false,
        };
        let mut a = Audio::new(&track(), &o, None).unwrap();
        let pkts = packets(300, 0);
        let t0 = 5_000 * MS;
        let mut cut_frames = 0;
        let mut play = |rx: &mut AudioReceive, a: &mut Audio, now: u64| {
            while let Some(o) = rx.poll(now) {
                if let AudioOutput::Play(f) = o {
                    let p = a.play(&f);
                    assert!(p.ok && p.cut <= f.may_cut);
                    rx.shortened(p.cut);
                    cut_frames += (p.cut > 0) as u32;
                }
            }
        };
        for (i, p) in pkts.iter().enumerate() {
            let t = t0 + i as u64 * 20 * MS;
            play(&mut rx, &mut a, t);
            if i == 20 {
                rx.delay_later(300 * MS);
            }
            if i == 80 {
                assert!(rx.lower_delay(1_000 * MS) >= 299 * MS);
            }
            rx.push_media(t, p);
        }
        play(&mut rx, &mut a, t0 + 8_000 * MS);
        let s = rx.stats().playout;
        assert_eq!((s.decoded, s.concealed, s.fec), (300, 0, 0), "{s:?}");
        assert!(
            s.shortened_frames >= 30 && s.delay_lowered_ms >= 297,
            "{s:?}"
        );
        assert!(rx.delay_ns() < 100 * MS + 2_500_000, "{}", rx.delay_ns());
        assert!(cut_frames >= 30);
        drop(a);
        let wav = std::fs::read(dir.join("audio.wav")).unwrap();
        let left: Vec<i32> = wav[44..]
            .chunks_exact(4)
            .map(|c| i16::from_le_bytes([c[0], c[1]]) as i32)
            .collect();
        let step = |x: &[i32]| x.windows(2).map(|w| (w[1] - w[0]).abs()).max().unwrap();
        // Before the raise (the first 20 frames, after the decoder's first one) and after
        // its pause (frame 21 on plays 300 ms later: from sample 21 x 960 + 14 400 on).
        let before = step(&left[960..20 * 960]);
        let after = step(&left[21 * 960 + 14_400 + 960..]);
        assert!(
            after <= before + before / 10,
            "step {after} after, {before} before"
        );
        // Nor a dip: the tone's peak over every period (110 samples) stays within 10 % of its
        // peak before (a cut out of phase cross-fades two waves that cancel in part).
        let peak = |x: &[i32]| x.iter().map(|v| v.abs()).max().unwrap();
        let full = peak(&left[960..20 * 960]);
        let low = left[21 * 960 + 14_400 + 960..]
            .chunks_exact(110)
            .map(peak)
            .min()
            .unwrap();
        assert!(
            low * 10 >= full * 9,
            "peak {low} in a period after, {full} before"
        );
        // 300 frames and the 300-ms pause, less what was cut.
        let want = 300 * 960 + 14_400 - s.delay_lowered_ms as usize * 48;
        assert!(
            left.len().abs_diff(want) <= 48,
            "{} samples, {want} wanted",
            left.len()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The audio's `/metrics` lines: one TYPE line per series, the delay in seconds.
    #[test]
    fn metrics_give_the_delay_and_its_moves() {
        let mut s = AudioStats::default();
        s.playout.delay_ms = 830;
        s.playout.delay_raises = 2;
        s.playout.shortened_frames = 17;
        let m = Audio::metrics(&s, "{viewer=\"v\"}");
        assert!(m.contains("# TYPE layercast_player_audio_delay_seconds gauge\nlayercast_player_audio_delay_seconds{viewer=\"v\"} 0.83\n"), "{m}");
        assert!(m.contains("layercast_player_audio_delay_raises_total{viewer=\"v\"} 2\n"));
        assert!(m.contains("layercast_player_audio_shortened_frames_total{viewer=\"v\"} 17\n"));
        let types = m.lines().filter(|l| l.starts_with("# TYPE")).count();
        let samples = m.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!((types, samples), (11, 11));
    }

    /// The sender report maps RTP time to capture time; the audio clock then says where a
    /// capture time plays: the frame of capture C plays at C + offset.
    #[test]
    fn clock_from_the_sender_report() {
        let mut a = new();
        let t0 = 1_700_000_001_030_000_000u64;
        // The playout's next frame: RTP time 48 000 at t0 + 100 ms.
        let anchor = Some((t0 + 100 * MS, 48_000));
        assert_eq!(a.clock(anchor), None);
        let sr = codec::rtcp::SenderReport {
            ssrc: 42,
            ntp: codec::rtcp::ntp_from_unix_ns(1_700_000_001_000_000_000),
            rtp_ts: 48_000,
            packets: 0,
            octets: 0,
        };
        a.push_rtcp(&sr.to_bytes("x"));
        let c = a.clock(anchor).unwrap();
        // Captured at ...001.000, plays at t0 + 100 ms.
        assert_eq!(c.play_time(1_700_000_001_000_000_000), t0 + 100 * MS);
        assert_eq!(a.clock(None), None);
        let m = SrMap {
            capture_ns: 1_000_000_000,
            rtp: u32::MAX - 899,
            rate: 90_000,
        };
        assert_eq!(m.capture_of(100), 1_000_000_000 + 1_000_000_000 / 90);
    }

    #[test]
    fn wav_is_a_time_line() {
        let dir = std::env::temp_dir().join(format!("lc-wav-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.wav");
        let mut w = WavWriter::create(&p, 2).unwrap();
        assert_eq!(w.write_at(1_000 * MS, &[1; 1920]), 0);
        // 100 ms later (a pause of 80 ms): sample 4800.
        assert_eq!(w.write_at(1_100 * MS, &[2; 1920]), 4800);
        w.finish_header().unwrap();
        drop(w);
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[..4], b"RIFF");
        let data = u32::from_le_bytes([b[40], b[41], b[42], b[43]]) as usize;
        assert_eq!(data, (4800 + 960) * 4);
        assert_eq!(b.len(), 44 + data);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
