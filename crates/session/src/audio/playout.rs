//! The audio jitter buffer and playout clock: Opus RTP packets with their receive times in,
//! what to play for each 20-ms frame out, at its local play time.
//!
//! Frame `n` of the stream plays at `first arrival + delay + n × 20 ms`, whatever the network
//! does (audio is the master clock: the video asks where a capture time plays), until the
//! host moves the delay: up at once for its video ([`Playout::delay_later`], one pause), down
//! gradually when its video allows ([`Playout::lower_delay`]: the host cuts frames short by a
//! pitch period, [`super::stretch`], never below the starting delay nor below what the last
//! 2 s of packets need). At a frame's
//! play time: its packet ([`FrameSource::Packet`]); else the next packet, whose in-band FEC
//! covers it ([`FrameSource::Fec`]); else concealment. A frame missing while the next
//! packet's sequence number follows on without a gap was never sent (the sender's silence
//! after a source restart): [`FrameSource::Silence`]. A packet after its frame played is late
//! (refused); duplicates and malformed packets are refused. When the stream stops (no packet
//! for [`IDLE_NS`], nothing buffered) the playout pauses and the frames concealed since the
//! last packet count as the stream's end (`trailing`), not as loss; the next packet starts it
//! on a new anchor. Which frames were sent and never arrived is counted here (`lost`), after
//! repair: a packet the repair stream rebuilt arrives like any other.

use super::stretch::MIN_CUT;
use proto::opus::{OpusDepacketizer, OpusRtp, FRAME_20MS};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// Nanoseconds of one 20-ms frame.
pub const FRAME_NS: u64 = 20_000_000;
/// No packet for this long with nothing buffered: the stream stopped; output pauses.
pub const IDLE_NS: u64 = 500_000_000;
/// Packets further ahead of the play position than this are from a new timeline.
const MAX_AHEAD_FRAMES: u64 = 150;
/// Consecutive late packets (200 ms of audio) after which the playout restarts later.
const LATE_RESYNC: u64 = 10;
/// Smallest playout delay after the first packet (jitter and the FEC look-ahead of one
/// packet).
pub const MIN_DELAY_NS: u64 = 60_000_000;
/// How far back the packets' margins (play time less arrival) are remembered when a lower
/// delay is granted: the delay comes down only as far as every packet of this window allows.
const MARGIN_WINDOW_NS: u64 = 2_000_000_000;
/// A grant needs at least this many frames in the margin window (0.5 s of audio).
const MARGIN_MIN_FRAMES: usize = 25;
/// Samples per channel a frame may be shortened by, earned per frame played (2 ms in 20:
/// the playout runs at most 10 % fast) and saved up to [`CUT_CREDIT_MAX`].
const CUT_CREDIT_PER_FRAME: u64 = 96;
const CUT_CREDIT_MAX: u64 = 480;

/// What plays in one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameSource {
    /// The frame's own packet: decode `payload`.
    Packet {
        payload: Vec<u8>,
        seq: u64,
        arrival_ns: u64,
    },
    /// Its packet is missing; the next packet is here: decode its in-band FEC.
    Fec { next_payload: Vec<u8> },
    /// Missing, nothing to rebuild it from: the decoder's concealment.
    Conceal,
    /// Never sent (the sender's silence): play zeros.
    Silence,
}

/// One frame to play now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayFrame {
    /// Local time it plays at, ns (the receive times' clock).
    pub at_ns: u64,
    /// Its RTP time (extended, 48 kHz).
    pub rtp_ts: u64,
    pub source: FrameSource,
    /// Samples per channel the host may cut out of the decoded frame
    /// ([`super::stretch::shorten`]) to bring the delay down; it tells the playout what it
    /// cut ([`Playout::shortened`]). 0: play the frame whole.
    pub may_cut: usize,
}

/// Why a packet was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not an RTP packet of the track's payload type carrying a valid Opus packet.
    Malformed,
    /// Its frame already played.
    Late,
    Duplicate,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::Late => "late",
            Refusal::Duplicate => "duplicate",
        }
    }
}

/// What the playout did (per-second log, telemetry, `/metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PlayoutStats {
    /// Packets accepted into the jitter buffer.
    pub packets: u64,
    /// Packets the sequence numbers say were sent and never arrived (nor were rebuilt).
    pub lost: u64,
    /// Frames played from their own packet, from the next packet's FEC, concealed (the
    /// host's decode failures are moved from the first two to `decode_errors`).
    pub decoded: u64,
    pub fec: u64,
    pub concealed: u64,
    /// Runs of consecutive concealed frames.
    pub concealment_events: u64,
    /// Frames of the sender's silence (a timestamp gap without a sequence gap).
    pub silence: u64,
    pub late: u64,
    pub duplicates: u64,
    pub malformed: u64,
    pub decode_errors: u64,
    /// Times the output stopped because the stream did (and restarted on a new anchor).
    pub underruns: u64,
    /// Times the playout restarted on a new anchor while packets kept coming: every packet
    /// came late for 200 ms (the path's delay rose), the sender's timeline jumped, or a new
    /// sender instance.
    pub resyncs: u64,
    /// Frames concealed after the stream's last packet before it counted as stopped.
    pub trailing: u64,
    /// Times the playout delay was raised for the video ([`Playout::delay_later`]): each is
    /// an audible pause of `delay_raised_ms` in all.
    pub delay_raises: u64,
    pub delay_raised_ms: u64,
    /// Frames the host shortened to bring the delay down ([`Playout::shortened`]) and the
    /// time cut out of them in all (the delay lowered without a gap).
    pub shortened_frames: u64,
    pub delay_lowered_ms: u64,
    /// The playout delay now (after the first packet's arrival), ms.
    pub delay_ms: u64,
}

/// The jitter buffer and playout of one Opus stream.
#[derive(Debug)]
pub struct Playout {
    depay: OpusDepacketizer,
    ssrc: Option<u32>,
    /// Extended timestamp -> (packet, arrival ns).
    buf: BTreeMap<u64, (OpusRtp, u64)>,
    /// (local ns, extended timestamp) of the next frame to play.
    next: Option<(u64, u64)>,
    /// Extended sequence number of the last frame played from a packet (loss detection).
    last_seq: Option<u64>,
    last_arrival: u64,
    delay_ns: u64,
    concealing: bool,
    late_streak: u64,
    /// Frames of the concealed run in progress (if the stream stops, they were the end of
    /// the stream, not a loss: taken back from the concealment counts).
    run: u64,
    /// A new sender instance began since the last call of [`Playout::take_new_instance`].
    new_instance: bool,
    /// The margin the starting delay gave the first packet: the delay comes down only as far
    /// as every recent packet keeps it.
    floor_ns: u64,
    /// How much later than at the start the playout runs (raises, restarts behind a risen
    /// path delay, less the cuts since): the delay never comes down further than this.
    above_ns: u64,
    /// (play time, margin + `shift_ns` then) of the frames played from their own packet in
    /// the last [`MARGIN_WINDOW_NS`]: the margin is play time less arrival.
    margins: VecDeque<(u64, i64)>,
    /// Time cut out less time added since the start, ns: a margin recorded earlier is
    /// `recorded - shift_ns` now.
    shift_ns: i64,
    /// Samples per channel still to cut (granted), and the cut credit ([`CUT_CREDIT_MAX`]).
    to_cut: u64,
    cut_credit: u64,
    /// Thirds of a nanosecond left over from converting cut samples to time (a sample is
    /// 62 500 / 3 ns).
    cut_rem: u64,
    cut_total_ns: u64,
    pub stats: PlayoutStats,
}

impl Playout {
    /// The playout of payload type `payload_type`, `delay_ns` after the first packet (at least
    /// [`MIN_DELAY_NS`]).
    pub fn new(payload_type: u8, ssrc: Option<u32>, delay_ns: u64) -> Playout {
        Playout {
            depay: OpusDepacketizer::new(payload_type),
            ssrc,
            buf: BTreeMap::new(),
            next: None,
            last_seq: None,
            last_arrival: 0,
            delay_ns: delay_ns.max(MIN_DELAY_NS),
            concealing: false,
            late_streak: 0,
            run: 0,
            new_instance: false,
            floor_ns: delay_ns.max(MIN_DELAY_NS),
            above_ns: 0,
            margins: VecDeque::new(),
            shift_ns: 0,
            to_cut: 0,
            cut_credit: 0,
            cut_rem: 0,
            cut_total_ns: 0,
            stats: PlayoutStats::default(),
        }
    }

    /// Whether a new sender instance began since the last call (its clock mapping is new).
    pub fn take_new_instance(&mut self) -> bool {
        std::mem::take(&mut self.new_instance)
    }

    /// One packet (after decryption and repair), received at `recv_ns`.
    pub fn push(&mut self, recv_ns: u64, datagram: &[u8]) -> Result<(), Refusal> {
        let Ok(p) = self.depay.depacketize(datagram) else {
            self.stats.malformed += 1;
            return Err(Refusal::Malformed);
        };
        if p.new_stream && self.ssrc.is_some_and(|s| s != p.ssrc) && self.next.is_some() {
            // A new sender instance: its timeline (and clock mapping) replace the old one.
            self.stats.resyncs += 1;
            self.restart();
            self.new_instance = true;
        }
        self.ssrc = Some(p.ssrc);
        self.last_arrival = recv_ns;
        if let Some((t, ts)) = self.next {
            if p.timestamp < ts {
                self.stats.late += 1;
                self.late_streak += 1;
                if self.late_streak < LATE_RESYNC {
                    return Err(Refusal::Late);
                }
                // Every packet for a while came after its play time: the path's delay rose
                // past the playout delay (a queue filled). Start again behind it: one gap
                // instead of silence for as long as the delay stays up. This packet was
                // counted late but starts the new timeline. It plays that much later than
                // the old timeline would have: the delay rose by as much (and may come back
                // down when the queue drains).
                let old_play = t.saturating_sub((ts - p.timestamp) * 62_500 / 3);
                self.above_ns += (recv_ns + self.delay_ns).saturating_sub(old_play);
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
            return Err(Refusal::Duplicate);
        }
        self.stats.packets += 1;
        if self.next.is_none() {
            self.next = Some((recv_ns + self.delay_ns, p.timestamp));
        }
        self.buf.insert(p.timestamp, (p, recv_ns));
        Ok(())
    }

    /// The next frame to play: (local ns, extended RTP time); `None` while paused.
    pub fn anchor(&self) -> Option<(u64, u64)> {
        self.next
    }

    /// When [`Playout::poll`] next has a frame.
    pub fn next_due(&self) -> Option<u64> {
        self.next.map(|(t, _)| t)
    }

    /// Packets held.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Plays everything from the next frame on `by_ns` later, and later packets' anchors too:
    /// the host's audio pauses once for `by_ns` (no frame is lost or concealed). What a
    /// player does when its video needs more delay than the audio gives (the audio is the
    /// clock the video follows). A raise cancels what was granted to cut
    /// ([`Playout::lower_delay`]).
    pub fn delay_later(&mut self, by_ns: u64) {
        if by_ns == 0 {
            return;
        }
        self.to_cut = 0;
        self.shift_ns -= by_ns as i64;
        self.above_ns += by_ns;
        self.delay_ns += by_ns;
        if let Some((t, ts)) = self.next {
            self.next = Some((t + by_ns, ts));
        }
        self.stats.delay_raises += 1;
        self.stats.delay_raised_ms += by_ns / 1_000_000;
    }

    /// The playout delay now (after the first packet's arrival).
    pub fn delay_ns(&self) -> u64 {
        self.delay_ns
    }

    /// The host allows the delay `by_ns` lower (its video would still be shown in time): the
    /// playout lowers it by as much of that as its own packets allow (every packet of the last
    /// [`MARGIN_WINDOW_NS`] still in time with the starting delay's margin), and never below
    /// where it started (only what raises and restarts added comes off), by letting the
    /// host cut short the frames it plays ([`PlayFrame::may_cut`], at most 10 % of the
    /// time). Replaces the previous grant. Returns what it will lower, ns.
    pub fn lower_delay(&mut self, by_ns: u64) -> u64 {
        let own = match self.margins.len() >= MARGIN_MIN_FRAMES {
            true => self
                .margins
                .iter()
                .map(|&(_, m)| m - self.shift_ns - self.floor_ns as i64)
                .min()
                .unwrap_or(0)
                .max(0) as u64,
            false => 0,
        };
        let ns = by_ns.min(own).min(self.above_ns);
        self.to_cut = ns * 48 / 1_000_000;
        self.to_cut * 1_000_000 / 48
    }

    /// The host cut `samples` (per channel) out of the frame it was just given: everything
    /// from the next frame on plays that much earlier.
    pub fn shortened(&mut self, samples: usize) {
        if samples == 0 {
            return;
        }
        let s = samples as u64;
        self.to_cut = self.to_cut.saturating_sub(s);
        self.cut_credit = self.cut_credit.saturating_sub(s);
        self.cut_rem += s * 62_500;
        let ns = self.cut_rem / 3;
        self.cut_rem %= 3;
        if let Some((t, ts)) = self.next {
            self.next = Some((t.saturating_sub(ns), ts));
        }
        self.delay_ns = self.delay_ns.saturating_sub(ns);
        self.above_ns = self.above_ns.saturating_sub(ns);
        self.shift_ns += ns as i64;
        self.cut_total_ns += ns;
        self.stats.shortened_frames += 1;
        self.stats.delay_lowered_ms = self.cut_total_ns / 1_000_000;
    }

    /// Drops the buffer and the anchor: the next packet starts the playout again.
    fn restart(&mut self) {
        self.margins.clear();
        self.to_cut = 0;
        self.buf.clear();
        self.next = None;
        self.last_seq = None;
        self.concealing = false;
        self.late_streak = 0;
    }

    /// The next frame due by `now_ns`, if any.
    pub fn poll(&mut self, now_ns: u64) -> Option<PlayFrame> {
        let (t, ts) = self.next?;
        if t > now_ns {
            return None;
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
            return None;
        }
        let f = self.frame(t, ts);
        self.next = Some((t + FRAME_NS, f.rtp_ts + FRAME_20MS as u64));
        Some(f)
    }

    /// The frame due at local time `t` whose RTP time is `ts`. The grid follows a packet that
    /// starts inside the frame: after a sender discontinuity the stream's timestamps are
    /// re-anchored on its capture clock, which shifts them by a fraction of a frame.
    fn frame(&mut self, t: u64, ts: u64) -> PlayFrame {
        let f = FRAME_20MS as u64;
        let key = self.buf.range(ts..ts + f).next().map(|(k, _)| *k);
        let ts = key.unwrap_or(ts);
        let own = key.and_then(|k| self.buf.remove(&k));
        let source = match own {
            Some((p, arr)) => {
                if let Some(l) = self.last_seq {
                    if p.seq > l + 1 {
                        // Counted here once, whether the missing frames were recovered or not.
                        self.stats.lost += p.seq - l - 1;
                    }
                }
                self.last_seq = Some(p.seq);
                self.stats.decoded += 1;
                while self
                    .margins
                    .front()
                    .is_some_and(|&(at, _)| at + MARGIN_WINDOW_NS < t)
                {
                    self.margins.pop_front();
                }
                self.margins
                    .push_back((t, t as i64 - arr as i64 + self.shift_ns));
                FrameSource::Packet {
                    payload: p.payload,
                    seq: p.seq,
                    arrival_ns: arr,
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
                match next {
                    _ if !sent => {
                        self.stats.silence += 1;
                        FrameSource::Silence
                    }
                    Some((np, _)) => {
                        self.stats.fec += 1;
                        FrameSource::Fec {
                            next_payload: np.payload.clone(),
                        }
                    }
                    None => {
                        self.stats.concealed += 1;
                        FrameSource::Conceal
                    }
                }
            }
        };
        let concealed = source == FrameSource::Conceal;
        if concealed && !self.concealing {
            self.stats.concealment_events += 1;
            self.run = 0;
        }
        self.run += u64::from(concealed);
        self.concealing = concealed;
        // Concealment is left whole: it is a guess already, and a gap is no time to hurry.
        self.cut_credit = (self.cut_credit + CUT_CREDIT_PER_FRAME).min(CUT_CREDIT_MAX);
        let allowed = self.to_cut.min(self.cut_credit) as usize;
        let may_cut = match allowed >= MIN_CUT && !concealed {
            true => allowed,
            false => 0,
        };
        PlayFrame {
            at_ns: t,
            rtp_ts: ts,
            source,
            may_cut,
        }
    }

    /// The host could not decode `f` (it concealed instead): counted as a decode error, not
    /// as decoded.
    pub fn decode_failed(&mut self, f: &PlayFrame) {
        match f.source {
            FrameSource::Packet { .. } => self.stats.decoded = self.stats.decoded.saturating_sub(1),
            FrameSource::Fec { .. } => self.stats.fec = self.stats.fec.saturating_sub(1),
            _ => return,
        }
        self.stats.decode_errors += 1;
    }
}

#[cfg(test)]
mod tests;
