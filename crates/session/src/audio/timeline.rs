//! The audio track's timeline on the send side: PCM buffers with capture times in, 20-ms frames
//! of PCM with their RTP time out, ready for the host's encoder.
//!
//! RTP time is the session's media clock ([`MediaClock`]): a frame's timestamp is the capture
//! time of its first *decoded* sample on a 48-kHz clock that started at the session's media
//! epoch (the encoder's look-ahead earlier than its first input sample, since the decoder's
//! output lags its input by that much), so audio and video (on the same epoch at 90 kHz) need no
//! other mapping than the RTCP sender reports carry. Samples are counted along the timeline; a
//! buffer far off it re-anchors it (a source restart, a clock step: the next frame is marked a
//! discontinuity), one behind it (after silence was made for that time) is skipped, and a
//! source without sound gets silence so the track never stops.

use proto::opus::FRAME_20MS;

/// Largest gap between where the timeline is and a new buffer's capture time that is still
/// taken as the same timeline; beyond it the stream is re-anchored on the capture time.
const REANCHOR_NS: u64 = 20_000_000;
/// A source without sound: once the timeline lags the pictures by this much, silence is made
/// up to [`SILENCE_LEAD_NS`] behind them.
const SILENCE_AFTER_NS: u64 = 200_000_000;
const SILENCE_LEAD_NS: u64 = 100_000_000;
/// Nanoseconds of one sample at 48 kHz, rounded down: the step of a buffer's capture time from
/// one sample to the next (where the timeline ends is counted exactly).
const SAMPLE_NS: u64 = 1_000_000_000 / 48_000;

/// The session's media clock: RTP time of any stream = (capture − epoch) × clock rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaClock {
    /// Unix ns of RTP time 0.
    pub epoch_ns: u64,
}

impl MediaClock {
    /// RTP time (wrapping) of Unix time `ns` on a `rate`-Hz clock.
    pub fn rtp(&self, ns: u64, rate: u32) -> u32 {
        let d = ns.saturating_sub(self.epoch_ns) as u128;
        (d * rate as u128 / 1_000_000_000) as u32
    }
}

/// One 20-ms frame of PCM for the encoder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcmFrame {
    /// Interleaved samples, 960 per channel.
    pub pcm: Vec<i16>,
    /// RTP time of its first decoded sample.
    pub rtp_ts: u32,
    /// Capture time of its first decoded sample (Unix ns).
    pub capture_ns: u64,
    /// The first frame after a re-anchoring.
    pub discontinuity: bool,
}

/// Counters of the timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimelineStats {
    /// Re-anchorings (source restart, clock step).
    pub discontinuities: u64,
    /// Frames of silence made for a source without sound.
    pub silence_frames: u64,
    /// Samples that arrived behind the timeline (overlap after silence), skipped.
    pub late_samples: u64,
}

/// PCM with capture times in, 20-ms frames with RTP times out.
#[derive(Debug)]
pub struct Timeline {
    clock: MediaClock,
    channels: usize,
    /// The encoder's look-ahead, samples.
    lookahead: u32,
    /// Samples (interleaved) of the frame being filled.
    pending: Vec<i16>,
    /// RTP time and capture time of the first sample of `pending`, once anchored.
    anchor: Option<(u32, u64)>,
    /// First picture seen before any sound (silence fill starts from there).
    waiting_since: Option<u64>,
    discontinuity: bool,
    pub stats: TimelineStats,
}

impl Timeline {
    /// The timeline of `channels` (1 or 2) channels for an encoder with `lookahead` samples of
    /// look-ahead.
    pub fn new(clock: MediaClock, channels: u8, lookahead: u32) -> Timeline {
        let channels = channels.clamp(1, 2) as usize;
        Timeline {
            clock,
            channels,
            lookahead,
            pending: Vec::with_capacity(FRAME_20MS as usize * channels),
            anchor: None,
            waiting_since: None,
            discontinuity: false,
            stats: TimelineStats::default(),
        }
    }

    /// Capture time where the next sample of the timeline falls (None before the first).
    fn end(&self) -> Option<u64> {
        self.anchor.map(|(_, cap)| {
            cap + (self.pending.len() / self.channels) as u64 * 1_000_000_000 / 48_000
        })
    }

    /// `pcm` (interleaved, 48 kHz) captured from `capture_ns` on; `out` gets every frame
    /// completed.
    pub fn push_pcm(&mut self, pcm: &[i16], capture_ns: u64, out: &mut dyn FnMut(PcmFrame)) {
        let mut pcm = &pcm[..pcm.len() - pcm.len() % self.channels];
        let mut cap = capture_ns;
        if let Some(end) = self.end() {
            if cap + REANCHOR_NS < end {
                // Behind the timeline (silence was made for it): skip what overlaps.
                let skip_ns = end - cap;
                let skip = ((skip_ns as u128 * 48_000 / 1_000_000_000) as usize * self.channels)
                    .min(pcm.len());
                self.stats.late_samples += (skip / self.channels) as u64;
                pcm = &pcm[skip..];
                cap = end;
                if pcm.is_empty() {
                    return;
                }
            } else if cap > end + REANCHOR_NS {
                // A jump forward: finish the frame with silence, restart on the new time.
                self.stats.discontinuities += 1;
                self.flush(out);
                self.anchor = None;
                self.discontinuity = true;
            }
        }
        for chunk in pcm.chunks(self.channels) {
            if self.anchor.is_none() {
                let rtp = self.clock.rtp(cap, 48_000).wrapping_sub(self.lookahead);
                self.anchor = Some((rtp, cap));
            }
            self.pending.extend_from_slice(chunk);
            cap += SAMPLE_NS;
            if self.pending.len() == FRAME_20MS as usize * self.channels {
                self.emit(out);
            }
        }
    }

    /// A picture was captured at `capture_ns`: if no sound has come for a while (a source
    /// without an audio track), make silence up to shortly before it.
    pub fn keep_up_with(&mut self, capture_ns: u64, out: &mut dyn FnMut(PcmFrame)) {
        let end = match self.end() {
            Some(e) => e,
            None => *self.waiting_since.get_or_insert(capture_ns),
        };
        if capture_ns < end + SILENCE_AFTER_NS {
            return;
        }
        let target = capture_ns - SILENCE_LEAD_NS;
        // After a long gap the silence starts 2 s back (a re-anchoring), not at the old end.
        let mut at = end.max(target.saturating_sub(2_000_000_000));
        let zeros = vec![0i16; FRAME_20MS as usize * self.channels];
        while at + 20_000_000 <= target {
            self.stats.silence_frames += 1;
            self.push_pcm(&zeros, at, out);
            at = self.end().unwrap_or(at + 20_000_000);
        }
    }

    /// Completes a partial frame with silence.
    fn flush(&mut self, out: &mut dyn FnMut(PcmFrame)) {
        if !self.pending.is_empty() {
            self.pending.resize(FRAME_20MS as usize * self.channels, 0);
            self.emit(out);
        }
    }

    fn emit(&mut self, out: &mut dyn FnMut(PcmFrame)) {
        let Some((rtp, cap)) = self.anchor else {
            return;
        };
        let pcm = std::mem::replace(
            &mut self.pending,
            Vec::with_capacity(FRAME_20MS as usize * self.channels),
        );
        self.anchor = Some((
            rtp.wrapping_add(FRAME_20MS),
            cap + FRAME_20MS as u64 * 1_000_000_000 / 48_000,
        ));
        out(PcmFrame {
            pcm,
            rtp_ts: rtp,
            capture_ns: cap.saturating_sub(self.lookahead as u64 * 1_000_000_000 / 48_000),
            discontinuity: std::mem::take(&mut self.discontinuity),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPOCH: u64 = 1_000_000_000_000;

    /// 10-ms buffers make 20-ms frames 960 apart on the media clock, the look-ahead earlier;
    /// a jump re-anchors (one discontinuity, flagged on the next frame); pictures without sound
    /// get silence, and sound overlapping it is skipped, not framed twice.
    #[test]
    fn frames_follow_the_media_clock() {
        let clock = MediaClock { epoch_ns: EPOCH };
        let mut t = Timeline::new(clock, 2, 312);
        let mut got = Vec::new();
        let t0 = EPOCH + 5_000_000_000;
        for i in 0..10u64 {
            t.push_pcm(&[1i16; 960], t0 + i * 10_000_000, &mut |f| got.push(f));
        }
        assert_eq!(got.len(), 5);
        for (i, f) in got.iter().enumerate() {
            assert_eq!(f.pcm.len(), 1920);
            assert_eq!(f.rtp_ts, clock.rtp(t0, 48_000) - 312 + 960 * i as u32);
            assert!(clock.rtp(f.capture_ns, 48_000).abs_diff(f.rtp_ts) <= 1);
            assert!(!f.discontinuity);
        }
        got.clear();
        t.push_pcm(&[0i16; 1920], t0 + 1_100_000_000, &mut |f| got.push(f));
        t.push_pcm(&[0i16; 1920], t0 + 1_120_000_000, &mut |f| got.push(f));
        assert_eq!(t.stats.discontinuities, 1);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].rtp_ts, clock.rtp(t0 + 1_100_000_000, 48_000) - 312);
        assert!(got[0].discontinuity && !got[1].discontinuity);
        got.clear();
        t.keep_up_with(t0 + 1_640_000_000, &mut |f| got.push(f));
        assert!(got.len() >= 20 && t.stats.silence_frames as usize >= 20);
        let n = got.len();
        t.push_pcm(&[5i16; 1920], t0 + 1_500_000_000, &mut |f| got.push(f));
        assert!(t.stats.late_samples > 0);
        assert!(got.len() >= n);
        assert!(got
            .windows(2)
            .all(|w| w[1].rtp_ts.wrapping_sub(w[0].rtp_ts) == 960));
    }
}
