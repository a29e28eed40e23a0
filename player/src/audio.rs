//! The audio path: Opus RTP packets (RFC 7587) with their receive times in, a jitter buffer,
//! libopus decode with in-band FEC and loss concealment, playout on the audio clock, out to
//! the speaker (`autoaudiosink`, window build) and/or headless files: `DIR/audio.wav` (what
//! played, sample-exact in time) and `DIR/audio.csv` (one row per 20-ms frame played, one per
//! refused packet).
//!
//! Audio is the master clock (docs/player.md "Audio and lip sync"): frame `n` of the stream
//! plays at `start + n x 20 ms`, whatever the network does; the video path asks
//! [`Audio::clock`] when a picture of a given capture time is due. A frame whose packet is
//! missing at its play time is recovered from the next packet's FEC when that one is there, and
//! concealed otherwise; a packet that comes after its frame played is late (counted, dropped).
//! Frames missing without a sequence gap are the sender's silence (a source restart): silence
//! is played, nothing is concealed. When the stream stops (layer 0 left, sender gone) the
//! output stops after [`IDLE_NS`], and the next packet starts it again on a new anchor.

use codec::opus::{Decoder, OpusDepacketizer, OpusRtp, FRAME_20MS};
use codec::rtcp::{parse_sender_reports, unix_ns_from_ntp};
use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// Nanoseconds of one 20-ms frame.
const FRAME_NS: u64 = 20_000_000;
/// No packet for this long with nothing buffered: the stream stopped; output pauses.
pub const IDLE_NS: u64 = 500_000_000;
/// Packets further ahead of the play position than this are from a new timeline.
const MAX_AHEAD_FRAMES: u64 = 150;
/// Consecutive late packets (200 ms of audio) after which the playout restarts later.
const LATE_RESYNC: u64 = 10;
/// Smallest playout delay after the first packet (jitter and the FEC look-ahead of one
/// packet).
pub const MIN_DELAY_NS: u64 = 60_000_000;

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

/// What the audio path did (per-second log, telemetry, `/metrics`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AudioStats {
    /// Packets accepted into the jitter buffer.
    pub packets: u64,
    /// Packets the sequence numbers say were sent and never arrived.
    pub lost: u64,
    /// Frames played from their own packet, from the next packet's FEC, concealed.
    pub decoded: u64,
    pub fec: u64,
    pub concealed: u64,
    /// Runs of consecutive concealed frames.
    pub concealment_events: u64,
    /// Frames of the sender's silence (a timestamp gap without a sequence gap).
    pub silence: u64,
    pub late: u64,
    pub duplicates: u64,
    /// Malformed packets (not RTP, wrong payload type, invalid Opus), counted and dropped.
    pub malformed: u64,
    pub decode_errors: u64,
    /// Times the output stopped because the stream did (and restarted on a new anchor).
    pub underruns: u64,
    /// Times the playout restarted on a new anchor while packets kept coming: every packet
    /// came late for 200 ms (the path's delay rose), the sender's timeline jumped, or a new
    /// sender instance.
    pub resyncs: u64,
    /// Frames played (concealed) after the stream's last packet before it counted as
    /// stopped.
    pub trailing: u64,
    pub sender_reports: u64,
}

/// Options of the audio output.
pub struct AudioOptions<'a> {
    /// Headless files `audio.wav` and `audio.csv` in this directory.
    pub out: Option<&'a Path>,
    /// Play through `autoaudiosink`.
    pub speaker: bool,
    /// Playout delay after the first packet (at least [`MIN_DELAY_NS`]).
    pub delay_ns: u64,
}

/// The audio path of one session.
pub struct Audio {
    depay: OpusDepacketizer,
    dec: Decoder,
    channels: usize,
    ssrc: Option<u32>,
    /// Jitter buffer: extended timestamp -> (packet, arrival ns).
    buf: BTreeMap<u64, (OpusRtp, u64)>,
    /// (local ns, extended timestamp) of the next frame to play.
    next: Option<(u64, u64)>,
    /// Extended sequence number of the last frame played from a packet (loss detection).
    last_seq: Option<u64>,
    highest_seq: Option<u64>,
    last_arrival: u64,
    delay_ns: u64,
    concealing: bool,
    late_streak: u64,
    /// Frames of the concealed run in progress (if the stream stops, they were the end of
    /// the stream, not a loss: taken back from the concealment counts).
    run: u64,
    sr: Option<SrMap>,
    pub stats: AudioStats,
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
            depay: OpusDepacketizer::new(p.payload_type),
            dec,
            channels: channels as usize,
            ssrc: track.streams.first().map(|s| s.ssrc),
            buf: BTreeMap::new(),
            next: None,
            last_seq: None,
            highest_seq: None,
            last_arrival: 0,
            delay_ns: o.delay_ns.max(MIN_DELAY_NS),
            concealing: false,
            late_streak: 0,
            run: 0,
            sr: None,
            stats: AudioStats::default(),
            out,
            level: (0.0, 0),
            last_level_db: f64::NEG_INFINITY,
            pcm: Vec::with_capacity(FRAME_20MS as usize * 2),
        })
    }

    /// One datagram of the audio stream (after decryption), received at `recv_ns` (kernel
    /// time, Unix ns). A malformed one is counted and dropped.
    pub fn push_rtp(&mut self, recv_ns: u64, datagram: &[u8]) {
        let p = match self.depay.depacketize(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                self.log_refused(recv_ns, "malformed");
                return;
            }
        };
        if p.new_stream && self.ssrc.is_some_and(|s| s != p.ssrc) && self.next.is_some() {
            // A new sender instance: its timeline (and clock mapping) replace the old one.
            self.stats.resyncs += 1;
            self.restart();
            self.sr = None;
        }
        self.ssrc = Some(p.ssrc);
        self.last_arrival = recv_ns;
        if let Some((_, ts)) = self.next {
            if p.timestamp < ts {
                self.stats.late += 1;
                self.late_streak += 1;
                self.log_refused(recv_ns, "late");
                if self.late_streak < LATE_RESYNC {
                    return;
                }
                // Every packet for a while came after its play time: the path's delay rose
                // past the playout delay (a queue filled). Start again behind it: one gap
                // instead of silence for as long as the delay stays up.
                self.stats.resyncs += 1;
                self.restart();
            }
            self.late_streak = 0;
            if p.timestamp >= ts + MAX_AHEAD_FRAMES * FRAME_20MS as u64 {
                // Far ahead: the sender's timeline jumped; start again on it.
                self.stats.resyncs += 1;
                self.restart();
            }
        }
        if self.buf.len() >= 2 * MAX_AHEAD_FRAMES as usize {
            // Cannot happen with a sane sender (packets this far ahead restart the timeline);
            // keeps the buffer bounded whatever arrives.
            self.stats.resyncs += 1;
            self.restart();
        }
        if self.buf.contains_key(&p.timestamp) {
            self.stats.duplicates += 1;
            self.log_refused(recv_ns, "duplicate");
            return;
        }
        self.stats.packets += 1;
        self.highest_seq = Some(self.highest_seq.map_or(p.seq, |h| h.max(p.seq)));
        if self.next.is_none() {
            self.next = Some((recv_ns + self.delay_ns, p.timestamp));
        }
        self.buf.insert(p.timestamp, (p, recv_ns));
    }

    /// One datagram from the stream's RTCP port: its sender report gives the audio clock's
    /// capture-time mapping.
    pub fn push_rtcp(&mut self, datagram: &[u8]) {
        if let Some(m) = SrMap::from_rtcp(datagram, self.ssrc, 48_000) {
            self.sr = Some(m);
            self.stats.sender_reports += 1;
        }
    }

    /// Where a sender capture time plays (needs a sender report and a running stream).
    pub fn clock(&self) -> Option<AudioClock> {
        let (local, ts) = self.next?;
        let sr = self.sr?;
        let cap = sr.capture_of(ts as u32);
        Some(AudioClock {
            offset_ns: local as i64 - cap as i64,
        })
    }

    /// When [`Audio::tick`] next has a frame to play.
    pub fn next_due(&self) -> Option<u64> {
        self.next.map(|(t, _)| t)
    }

    /// Level of the last second, dBFS (overlay).
    pub fn level_db(&self) -> f64 {
        self.last_level_db
    }

    /// Drops the buffer and the anchor: the next packet starts the playout again.
    fn restart(&mut self) {
        self.buf.clear();
        self.next = None;
        self.last_seq = None;
        self.concealing = false;
        self.late_streak = 0;
    }

    /// Plays every frame whose time has come by `now_ns`.
    pub fn tick(&mut self, now_ns: u64) {
        while let Some((t, ts)) = self.next {
            if t > now_ns {
                break;
            }
            if self.buf.is_empty() && now_ns.saturating_sub(self.last_arrival) > IDLE_NS {
                // The stream stopped: pause; the next packet starts it on a new anchor. The
                // frames concealed since the last packet were the stream's end, not a loss.
                if self.concealing {
                    self.stats.concealed -= self.run;
                    self.stats.concealment_events -= 1;
                    self.stats.trailing += self.run;
                }
                self.next = None;
                self.last_seq = None;
                self.concealing = false;
                self.stats.underruns += 1;
                break;
            }
            let ts = self.play_frame(t, ts);
            self.next = Some((t + FRAME_NS, ts + FRAME_20MS as u64));
        }
    }

    /// Plays the frame due at local time `t` whose RTP time is `ts`; returns the RTP time it
    /// played (the grid follows a packet that starts inside the frame: after a sender
    /// discontinuity the stream's timestamps are re-anchored on its capture clock, which
    /// shifts them by a fraction of a frame).
    fn play_frame(&mut self, t: u64, ts: u64) -> u64 {
        self.pcm.clear();
        let n = FRAME_20MS as usize;
        let f = FRAME_20MS as u64;
        let key = self.buf.range(ts..ts + f).next().map(|(k, _)| *k);
        let ts = key.unwrap_or(ts);
        let own = key.and_then(|k| self.buf.remove(&k));
        let (status, arrival, seq) = match own {
            Some((p, arr)) => {
                if let Some(l) = self.last_seq {
                    if p.seq > l + 1 {
                        // Counted here once, whether the missing frames were recovered or not.
                        self.stats.lost += p.seq - l - 1;
                    }
                }
                self.last_seq = Some(p.seq);
                match self.dec.decode(&p.payload, &mut self.pcm) {
                    Ok(_) => {
                        self.stats.decoded += 1;
                        ("decoded", Some(arr), Some(p.seq))
                    }
                    Err(_) => {
                        self.stats.decode_errors += 1;
                        let _ = self.dec.conceal(n, &mut self.pcm);
                        ("decode_error", Some(arr), Some(p.seq))
                    }
                }
            }
            None => {
                // The next packet held, wherever it is: its sequence number says whether this
                // frame was sent at all (no sequence gap: the sender's silence). Its in-band FEC
                // covers this frame only if it is the frame right after.
                let later = self.buf.range(ts + f..).next();
                let sent = match (later, self.last_seq) {
                    (Some((_, (np, _))), Some(l)) => np.seq > l + 1,
                    _ => true,
                };
                let next = later.filter(|(k, _)| **k < ts + 2 * f).map(|(_, v)| v);
                if !sent {
                    self.stats.silence += 1;
                    self.pcm.resize(n * self.channels, 0);
                }
                match next {
                    _ if !sent => ("silence", None, None),
                    Some((np, _)) => {
                        let payload = np.payload.clone();
                        match self.dec.decode_fec(&payload, n, &mut self.pcm) {
                            Ok(_) => {
                                self.stats.fec += 1;
                                ("fec", None, None)
                            }
                            Err(_) => {
                                self.stats.decode_errors += 1;
                                ("decode_error", None, None)
                            }
                        }
                    }
                    None => {
                        let _ = self.dec.conceal(n, &mut self.pcm);
                        self.stats.concealed += 1;
                        ("concealed", None, None)
                    }
                }
            }
        };
        let concealed = status == "concealed";
        if concealed && !self.concealing {
            self.stats.concealment_events += 1;
            self.run = 0;
        }
        self.run += u64::from(concealed);
        self.concealing = concealed;
        self.pcm.resize(n * self.channels, 0);
        for &s in &self.pcm {
            self.level.0 += (s as f64 / 32768.0).powi(2);
        }
        self.level.1 += self.pcm.len() as u64;
        if self.level.1 >= 48_000 * self.channels as u64 {
            self.last_level_db = 10.0 * (self.level.0 / self.level.1 as f64).max(1e-10).log10();
            self.level = (0.0, 0);
        }
        let capture = self.sr.map(|m| m.capture_of(ts as u32));
        let wav_sample = self.out.wav.as_mut().map(|w| w.write_at(t, &self.pcm));
        if let Some(c) = self.out.csv.as_mut() {
            let _ = writeln!(
                c,
                "{},{},{},{},{},{},{}",
                ts,
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
        ts
    }

    fn log_refused(&mut self, recv_ns: u64, what: &str) {
        if let Some(c) = self.out.csv.as_mut() {
            let _ = writeln!(c, ",,,,{what},{recv_ns},");
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

    /// The counters as JSON (per-second log, telemetry).
    pub fn json(&self) -> serde_json::Value {
        let s = &self.stats;
        serde_json::json!({"packets": s.packets, "lost": s.lost, "decoded": s.decoded,
            "fec": s.fec, "concealed": s.concealed, "concealment_events": s.concealment_events,
            "silence": s.silence, "late": s.late, "duplicates": s.duplicates,
            "malformed": s.malformed, "decode_errors": s.decode_errors,
            "underruns": s.underruns, "resyncs": s.resyncs, "trailing": s.trailing, "sender_reports": s.sender_reports,
            "level_db": if self.last_level_db.is_finite() { Some(self.last_level_db) } else { None }})
    }

    /// `/metrics` lines (`lab` = `{viewer="..."}`).
    pub fn metrics(&self, lab: &str) -> String {
        let s = &self.stats;
        let mut m = String::new();
        for (name, v) in [
            ("layercast_player_audio_packets_total", s.packets),
            ("layercast_player_audio_lost_total", s.lost),
            ("layercast_player_audio_fec_recovered_total", s.fec),
            ("layercast_player_audio_concealed_frames_total", s.concealed),
            (
                "layercast_player_audio_concealment_events_total",
                s.concealment_events,
            ),
            ("layercast_player_audio_late_total", s.late),
            ("layercast_player_audio_malformed_total", s.malformed),
            ("layercast_player_audio_underruns_total", s.underruns),
        ] {
            m.push_str(&format!("# TYPE {name} counter\n{name}{lab} {v}\n"));
        }
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

    /// `n` RTP packets of a 440-Hz tone, 20 ms each, from RTP time `ts0`.
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

    fn run(a: &mut Audio, pkts: &[Vec<u8>], arrive: impl Fn(usize) -> Option<u64>, end: u64) {
        let mut order: Vec<(u64, usize)> = (0..pkts.len())
            .filter_map(|i| arrive(i).map(|t| (t, i)))
            .collect();
        order.sort();
        for (t, i) in order {
            a.tick(t);
            a.push_rtp(t, &pkts[i]);
        }
        a.tick(end);
    }

    fn new(delay_ms: u64) -> Audio {
        Audio::new(
            &track(),
            &AudioOptions {
                out: None,
                speaker: false,
                delay_ns: delay_ms * 1_000_000,
            },
            None,
        )
        .unwrap()
    }

    const MS: u64 = 1_000_000;

    /// Clean path with jitter (up to 30 ms) under a 60-ms delay: every frame decoded, none
    /// concealed, none late; frames play exactly 20 ms apart.
    #[test]
    fn clean_path_plays_every_frame() {
        let pkts = packets(100, u32::MAX - 10 * 960);
        let mut a = new(60);
        let t0 = 1_000_000 * MS;
        let last = t0 + 60 * MS + 99 * 20 * MS;
        run(
            &mut a,
            &pkts,
            |i| Some(t0 + i as u64 * 20 * MS + (i as u64 * 7919 % 31) * MS),
            last,
        );
        let s = &a.stats;
        assert_eq!(
            (s.decoded, s.concealed, s.fec, s.late, s.lost),
            (100, 0, 0, 0, 0),
            "{s:?}"
        );
    }

    /// Isolated losses are recovered from the next packet's FEC; a burst of three loses
    /// one recovered and two concealed (one concealment event); nothing is late.
    #[test]
    fn loss_is_recovered_by_fec_then_concealed() {
        let pkts = packets(100, 0);
        let mut a = new(60);
        let t0 = 5_000 * MS;
        let lost = [10usize, 30, 50, 70, 71, 72];
        run(
            &mut a,
            &pkts,
            |i| (!lost.contains(&i)).then_some(t0 + i as u64 * 20 * MS),
            t0 + 2040 * MS,
        );
        let s = &a.stats;
        assert_eq!(s.lost, 6, "{s:?}");
        assert_eq!(s.fec, 4, "{s:?}");
        assert_eq!((s.concealed, s.concealment_events), (2, 1), "{s:?}");
        assert_eq!(s.decoded, 94);
    }

    /// Late, duplicate and malformed packets are counted and dropped; the stream stopping
    /// pauses the output (an underrun) instead of concealing forever; it starts again.
    #[test]
    fn bad_input_and_a_stopped_stream() {
        let pkts = packets(60, 0);
        let mut a = new(60);
        let t0 = 9_000 * MS;
        for (i, p) in pkts.iter().take(20).enumerate() {
            let t = t0 + i as u64 * 20 * MS;
            a.tick(t);
            a.push_rtp(t, p);
            a.push_rtp(t, p);
        }
        a.push_rtp(t0 + 400 * MS, &[0x80, 111, 0, 1]);
        a.push_rtp(t0 + 400 * MS, b"garbage");
        a.tick(t0 + 500 * MS);
        a.push_rtp(t0 + 500 * MS, &pkts[0]);
        assert_eq!(
            (a.stats.duplicates, a.stats.malformed, a.stats.late),
            (20, 2, 1)
        );
        a.tick(t0 + 2_000 * MS);
        assert_eq!(a.stats.underruns, 1);
        // The frames after the last packet are the stream's end, not concealed loss.
        assert_eq!(
            (a.stats.concealed, a.stats.concealment_events),
            (0, 0),
            "{:?}",
            a.stats
        );
        assert!(a.stats.trailing > 0 && a.stats.trailing <= IDLE_NS / FRAME_NS + 2);
        assert_eq!(a.next_due(), None);
        // The stream resumes (the sender's timeline moved on 2 s): played again.
        let decoded = a.stats.decoded;
        let later = packets(60, 2 * 48_000);
        for (i, p) in later.iter().enumerate().skip(40) {
            let t = t0 + 3_000 * MS + i as u64 * 20 * MS;
            a.tick(t);
            a.push_rtp(t, p);
        }
        a.tick(t0 + 5_000 * MS);
        assert_eq!(a.stats.decoded - decoded, 20);
    }

    /// After a sender discontinuity (a looping file) the timestamps are re-anchored on the
    /// capture clock, off the old 960-sample grid: the playout follows the new grid, plays
    /// every packet, and the gap (no sequence gap) is the sender's silence, not concealment.
    #[test]
    fn misaligned_timestamps_after_a_discontinuity_are_played() {
        let mut pkts = packets(50, 0);
        // The second half: 200 ms later plus 333 samples, sequence numbers continuing.
        let mut enc = Encoder::new(&EncoderConfig::default()).unwrap();
        let mut pk = OpusPacketizer::new(111, 42, 1000 + 50);
        pk.discontinuity();
        for f in 0..50u32 {
            let ts = 50 * 960 + 9600 + 333 + f * 960;
            pkts.push(
                pk.packetize(&enc.encode(&vec![0; 1920]).unwrap(), ts)
                    .unwrap(),
            );
        }
        let mut a = new(300);
        let t0 = 7_000 * MS;
        let at = |i: usize| Some(t0 + i as u64 * 20 * MS + if i >= 50 { 200 * MS } else { 0 });
        run(&mut a, &pkts, at, t0 + 300 * MS + 109 * 20 * MS);
        let s = &a.stats;
        assert_eq!((s.decoded, s.concealed, s.lost), (100, 0, 0), "{s:?}");
        assert_eq!(s.silence, 10, "{s:?}");
        assert!(a.buf.is_empty());
    }

    /// The path's delay rises to 1.5 s and stays (a queue filling at 15 ms per packet while
    /// packets keep coming): after 200 ms of late packets each time, the playout restarts
    /// behind the new delay instead of concealing for as long as the delay stays up; once
    /// the delay is steady every packet plays.
    #[test]
    fn a_rising_delay_restarts_the_playout() {
        let pkts = packets(400, 0);
        let mut a = new(100);
        let t0 = 3_000 * MS;
        let lag = |i: usize| (i.saturating_sub(100) as u64 * 15).min(1_500) * MS;
        run(
            &mut a,
            &pkts,
            |i| Some(t0 + i as u64 * 20 * MS + lag(i)),
            t0 + 1_600 * MS + 399 * 20 * MS,
        );
        let s = &a.stats;
        assert!((1..=20).contains(&s.resyncs), "{s:?}");
        assert_eq!(s.late, 10 * s.resyncs, "{s:?}");
        // Everything after the last restart played: the last 200 packets at least.
        assert!(s.decoded >= 300, "{s:?}");
        assert_eq!(s.underruns, 0, "{s:?}");
    }

    /// The sender report maps RTP time to capture time; the audio clock then says where a
    /// capture time plays: the frame of capture C plays at C + offset.
    #[test]
    fn clock_from_the_sender_report() {
        let pkts = packets(10, 48_000);
        let mut a = new(100);
        assert_eq!(a.clock(), None);
        let sr = codec::rtcp::SenderReport {
            ssrc: 42,
            ntp: codec::rtcp::ntp_from_unix_ns(1_700_000_001_000_000_000),
            rtp_ts: 48_000,
            packets: 0,
            octets: 0,
        };
        a.push_rtcp(&sr.to_bytes("x"));
        let t0 = 1_700_000_001_030_000_000u64;
        a.push_rtp(t0, &pkts[0]);
        let c = a.clock().unwrap();
        // Captured at ...001.000, arrived 30 ms later, plays 100 ms after arrival.
        assert_eq!(c.play_time(1_700_000_001_000_000_000), t0 + 100 * MS);
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
