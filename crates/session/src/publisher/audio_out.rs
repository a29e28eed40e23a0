//! The audio track's way through the Publisher: encoded frames in, datagrams out, sealed with
//! the session's sealer (the audio and repair streams have SSRCs of their own, so their own
//! nonces).

use super::Publisher;
use crate::audio::{AudioFrame, AudioSendStats, Datagram};

impl Publisher {
    /// One encoded audio frame (ignored, and counted as refused, in a session without an
    /// audio track: none is announced).
    pub fn push_audio(&mut self, f: AudioFrame) {
        match self.audio.as_mut() {
            Some(a) => a.push(f, self.sealer.as_mut()),
            None => self.stats.audio_refused += 1,
        }
    }

    /// The next datagram to send on its own, between bunches (the audio track's packets and
    /// repairs, as soon as they are ready).
    #[must_use]
    pub fn poll_datagram(&mut self) -> Option<Datagram> {
        self.audio.as_mut()?.poll_datagram()
    }

    /// The audio track's counters (a session with one).
    pub fn audio_stats(&self) -> Option<AudioSendStats> {
        self.audio.as_ref().map(|a| a.stats())
    }
}
