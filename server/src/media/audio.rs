//! The audio track's encoder: raw PCM with capture times in, encoded Opus frames with their
//! RTP and capture times out, queued for the media thread, whose `session::Publisher` makes
//! them RTP packets (RFC 7587) and repairs (`session::audio`).
//!
//! [`AudioEncoder`] is sans-IO: the source's callback hands it PCM and its capture time, it
//! encodes 20-ms frames (libopus, constant bit rate, in-band FEC) and returns ready frames.
//! [`AudioQueue`] is the interface the media thread drains: ready frames in capture order,
//! bounded. RTP time is the session's media clock ([`MediaClock`]): a packet's timestamp is
//! the capture time of its first *decoded* sample on a 48-kHz clock that started at the
//! session's media epoch, so audio and video (on the same epoch at 90 kHz) need no other
//! mapping than the RTCP sender reports carry.

use codec::opus::{Encoder, EncoderConfig};
use session::audio::{AudioFrame, PcmFrame, Timeline, TimelineStats};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// RTP payload type of the audio track.
pub const PAYLOAD_TYPE: u8 = 111;
/// Burst repair of the audio stream (docs/protocols/audio.md "Burst repair"): each packet
/// again `REPAIR_LAG` packets (200 ms) later as a one-packet repair, on a stream of its own
/// (the audio port + 2, SSRC audio + 1, this payload type). The bottleneck queue that
/// overflows when the path's rate drops loses audio in runs (6 of 7 packets in 140 ms at a
/// 400 kbit/s down-switch), which Opus in-band FEC (one packet back) cannot cover; a run
/// shorter than the lag comes back, as long as the playout delay covers the lag. The audio
/// rate once more.
pub const REPAIR_PAYLOAD_TYPE: u8 = 97;
pub const REPAIR_LAG: u8 = 10;
/// Bytes a repair packet carries beyond an audio packet (the RFC 8627 header with a short
/// mask).
const REPAIR_OVERHEAD: u64 = 12;
/// Packets queued before the oldest are dropped (1 s of 20-ms packets).
pub const MAX_QUEUED: usize = 50;
/// The session's media clock (`session::audio::timeline`).
pub use session::audio::MediaClock;

/// One encoded frame ready for the Publisher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AudioPacket {
    pub frame: AudioFrame,
    /// Capture time of its first decoded sample (Unix ns).
    pub capture_ns: u64,
}

/// Counters of the audio track (API and `/metrics`).
#[derive(Debug, Default)]
pub struct AudioStats {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    pub encode_errors: AtomicU64,
    /// Packets dropped because the queue was full (the sender did not keep up).
    pub dropped: AtomicU64,
    /// Re-anchorings of the timeline (source restart, clock step).
    pub discontinuities: AtomicU64,
    /// 20-ms frames of silence encoded for a source without sound.
    pub silence_frames: AtomicU64,
    /// Samples that arrived behind the timeline (overlap after silence), skipped.
    pub late_samples: AtomicU64,
    pub sent: AtomicU64,
    pub send_errors: AtomicU64,
}

/// Ready frames for the media thread, oldest first, bounded by [`MAX_QUEUED`].
#[derive(Debug, Default)]
pub struct AudioQueue {
    q: Mutex<VecDeque<AudioPacket>>,
    pub stats: AudioStats,
}

impl AudioQueue {
    pub fn push(&self, p: AudioPacket) {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        self.stats.packets.fetch_add(1, Ordering::Relaxed);
        self.stats
            .bytes
            .fetch_add(12 + p.frame.opus.len() as u64, Ordering::Relaxed);
        q.push_back(p);
        while q.len() > MAX_QUEUED {
            q.pop_front();
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The oldest ready packet.
    pub fn pop(&self) -> Option<AudioPacket> {
        self.q.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
    }

    #[cfg(test)]
    #[allow(clippy::len_without_is_empty)] // a test probe of the queue's depth
    pub fn len(&self) -> usize {
        self.q.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The audio track's settings (session config `audio`).
#[derive(Clone, Debug, PartialEq)]
pub struct AudioSettings {
    pub channels: u8,
    pub bitrate: u32,
    pub inband_fec: bool,
}

impl AudioSettings {
    /// Bytes of one RTP packet: 12-byte header plus the constant-bit-rate Opus packet.
    pub fn packet_bytes(&self) -> u64 {
        12 + self.bitrate as u64 * 20 / 8000
    }

    /// The stream's rate as announced (RTP packets of 20 ms, UDP payload bits), plus
    /// `extra` bytes per packet (encryption).
    pub fn rate_bps(&self, extra: u64) -> u64 {
        (self.packet_bytes() + extra) * 8 * 50
    }

    /// The rate of its repair stream, on the same terms as [`AudioSettings::rate_bps`].
    pub fn repair_rate_bps(&self, extra: u64) -> u64 {
        (self.packet_bytes() + extra + REPAIR_OVERHEAD) * 8 * 50
    }
}

/// PCM with capture times in, Opus frames out: the session's audio timeline
/// (`session::audio::Timeline`: RTP times, re-anchoring, silence for a source without sound)
/// and libopus.
pub struct AudioEncoder {
    enc: Encoder,
    timeline: Timeline,
    /// The timeline's counters already added to the shared [`AudioStats`].
    seen: TimelineStats,
    /// A discontinuity whose frame failed to encode: carried to the next frame.
    discontinuity: bool,
}

impl AudioEncoder {
    pub fn new(s: &AudioSettings, clock: MediaClock) -> codec::Result<AudioEncoder> {
        let mut enc = Encoder::new(&EncoderConfig {
            channels: s.channels,
            bitrate: s.bitrate,
            inband_fec: s.inband_fec,
            expected_loss_pct: if s.inband_fec { 10 } else { 0 },
        })?;
        let lookahead = enc.lookahead()?;
        Ok(AudioEncoder {
            enc,
            timeline: Timeline::new(clock, s.channels, lookahead),
            seen: TimelineStats::default(),
            discontinuity: false,
        })
    }

    /// Hands `pcm` (interleaved, 48 kHz) captured from `capture_ns` on; calls `out` for every
    /// frame encoded.
    pub fn push_pcm(
        &mut self,
        pcm: &[i16],
        capture_ns: u64,
        stats: &AudioStats,
        out: &mut dyn FnMut(AudioPacket),
    ) {
        let mut frames = Vec::new();
        self.timeline
            .push_pcm(pcm, capture_ns, &mut |f| frames.push(f));
        self.encode(frames, stats, out);
    }

    /// A picture was captured at `capture_ns`: if no sound has come for a while (a source
    /// without an audio track), encode silence up to shortly before it.
    pub fn keep_up_with(
        &mut self,
        capture_ns: u64,
        stats: &AudioStats,
        out: &mut dyn FnMut(AudioPacket),
    ) {
        let mut frames = Vec::new();
        self.timeline
            .keep_up_with(capture_ns, &mut |f| frames.push(f));
        self.encode(frames, stats, out);
    }

    fn encode(
        &mut self,
        frames: Vec<PcmFrame>,
        stats: &AudioStats,
        out: &mut dyn FnMut(AudioPacket),
    ) {
        let t = self.timeline.stats;
        let add = |c: &AtomicU64, now: u64, seen: u64| {
            c.fetch_add(now - seen, Ordering::Relaxed);
        };
        add(
            &stats.discontinuities,
            t.discontinuities,
            self.seen.discontinuities,
        );
        add(
            &stats.silence_frames,
            t.silence_frames,
            self.seen.silence_frames,
        );
        add(&stats.late_samples, t.late_samples, self.seen.late_samples);
        self.seen = t;
        for f in frames {
            self.discontinuity |= f.discontinuity;
            match self.enc.encode(&f.pcm) {
                Ok(opus) => out(AudioPacket {
                    frame: AudioFrame {
                        opus,
                        rtp_ts: f.rtp_ts,
                        discontinuity: std::mem::take(&mut self.discontinuity),
                    },
                    capture_ns: f.capture_ns,
                }),
                Err(_) => {
                    stats.encode_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AudioSettings {
        AudioSettings {
            channels: 2,
            bitrate: 64_000,
            inband_fec: true,
        }
    }

    /// 20-ms frames, timestamps 960 apart on the media clock, capture times and RTP times
    /// consistent, the marker only at the start and after a jump; a source without sound gets
    /// silence so the track keeps going.
    #[test]
    fn packets_follow_the_media_clock() {
        let clock = MediaClock {
            epoch_ns: 1_000_000_000_000,
        };
        let st = AudioStats::default();
        let mut e = AudioEncoder::new(&settings(), clock).unwrap();
        let mut got = Vec::new();
        let t0 = clock.epoch_ns + 5_000_000_000;
        // 10 buffers of 10 ms.
        for i in 0..10u64 {
            e.push_pcm(&vec![100i16; 960], t0 + i * 10_000_000, &st, &mut |p| {
                got.push(p)
            });
        }
        assert_eq!(got.len(), 5);
        for (i, p) in got.iter().enumerate() {
            assert!(!p.frame.discontinuity);
            assert!(codec::opus::packet_info(&p.frame.opus).is_ok());
            assert_eq!(12 + p.frame.opus.len() as u64, settings().packet_bytes());
            assert_eq!(
                p.frame.rtp_ts,
                clock.rtp(t0, 48_000).wrapping_sub(312) + 960 * i as u32
            );
            // Capture time and RTP time name the same instant (within a sample).
            assert!(clock.rtp(p.capture_ns, 48_000).abs_diff(p.frame.rtp_ts) <= 1);
        }
        // A jump of a second (source restart): re-anchored, marker set.
        got.clear();
        e.push_pcm(&vec![0i16; 1920], t0 + 1_100_000_000, &st, &mut |p| {
            got.push(p)
        });
        e.push_pcm(&vec![0i16; 1920], t0 + 1_120_000_000, &st, &mut |p| {
            got.push(p)
        });
        assert_eq!(st.discontinuities.load(Ordering::Relaxed), 1);
        assert_eq!(got.len(), 2);
        let ts: Vec<u32> = got.iter().map(|p| p.frame.rtp_ts).collect();
        assert_eq!(
            ts[0],
            clock.rtp(t0 + 1_100_000_000, 48_000).wrapping_sub(312)
        );
        assert_eq!(ts[1], ts[0].wrapping_add(960));
        assert!(got[0].frame.discontinuity);
        assert!(!got[1].frame.discontinuity);
        // No sound for 500 ms while pictures come: silence up to 100 ms before the picture.
        got.clear();
        e.keep_up_with(t0 + 1_640_000_000, &st, &mut |p| got.push(p));
        assert!(got.len() >= 20, "{} silence packets", got.len());
        let last = got.last().unwrap();
        assert!(last.capture_ns + 120_000_000 >= t0 + 1_540_000_000 - 20_000_000);
        // Real sound that overlaps the silence is skipped, not sent twice.
        let before = got.len();
        e.push_pcm(&vec![5i16; 1920], t0 + 1_500_000_000, &st, &mut |p| {
            got.push(p)
        });
        assert!(st.late_samples.load(Ordering::Relaxed) > 0);
        let ts: Vec<u32> = got.iter().map(|p| p.frame.rtp_ts).collect();
        assert!(
            ts.windows(2).all(|w| w[1].wrapping_sub(w[0]) == 960),
            "{ts:?}"
        );
        assert!(got.len() >= before);
    }

    #[test]
    fn queue_is_bounded_and_counts_drops() {
        let q = AudioQueue::default();
        for i in 0..(MAX_QUEUED as u32 + 5) {
            q.push(AudioPacket {
                frame: AudioFrame {
                    opus: vec![0xfc],
                    rtp_ts: i,
                    discontinuity: false,
                },
                capture_ns: i as u64,
            });
        }
        assert_eq!(q.len(), MAX_QUEUED);
        assert_eq!(q.stats.dropped.load(Ordering::Relaxed), 5);
        assert_eq!(q.pop().unwrap().frame.rtp_ts, 5);
        assert_eq!(settings().rate_bps(0), 68_800);
    }
}
