//! One browser: its str0m `Rtc` (ICE, DTLS-SRTP, RTCP, bandwidth estimate), its video
//! forwarder and layer selection, its audio stream, and what the edge reports about it.
//!
//! str0m's contract is kept here: after every mutation of the `Rtc` (a datagram, a timeout, a
//! written packet) its output is drained until it yields a timeout.

use crate::forward::{Forwarder, Send};
use crate::nack_burst::NackBurst;
use crate::resend::{Resender, Sent};
use crate::select::{Choice, Selector};
use crate::whep::Negotiated;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use str0m::media::KeyframeRequestKind;
use str0m::net::{Protocol, Receive};
use str0m::rtp::rtcp::Rtcp;
use str0m::rtp::RawPacket;
use str0m::rtp::{RtpWrite, SeqNo};
use str0m::{Event, IceConnectionState, Input, Output, Rtc};

/// A datagram to send.
#[derive(Debug, Clone)]
pub struct Transmit {
    pub source: SocketAddr,
    pub destination: SocketAddr,
    pub contents: Vec<u8>,
}

/// What a viewer tells the edge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ViewerSignal {
    Connected,
    /// The connection is gone (ICE failed or timed out, DTLS closed).
    Closed,
    /// The browser asked for a key picture (PLI or FIR).
    KeyRequest,
    /// A new bandwidth estimate or receiver report: time to re-evaluate the layers.
    Estimate,
}

/// Counters and gauges of one viewer, from the edge's view.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ViewerStats {
    /// str0m's send-side estimate, bit/s.
    pub estimate_bps: Option<f64>,
    /// Fraction lost over the last second, from the browser's transport-wide feedback (every
    /// packet, timely); from its receiver reports while there is no such figure.
    pub loss: f32,
    pub rtt: Option<Duration>,
    /// Video RTP packets and bytes sent, including retransmissions (str0m's count).
    pub video_packets: u64,
    pub video_bytes: u64,
    /// Media packets written (first transmissions) and audio packets written.
    pub media_packets: u64,
    pub audio_packets: u64,
    /// NACK requests, PLIs and FIRs received from the browser.
    pub nacks: u64,
    pub plis: u64,
    pub firs: u64,
    /// Retransmissions answering NACKs (RTX), = str0m's sent count minus first transmissions.
    pub rtx_packets: u64,
    /// Packets the browser reports lost (cumulative, RTCP receiver reports).
    pub remote_lost: u64,
    /// Times the repairs still owed were dropped for a key picture after heavy loss.
    pub repair_drops: u64,
    /// Second copies of NACKed packets sent in the media stream (`resend.rs`).
    pub repair_copies: u64,
    /// NACKed packets not copied: the copy budget was spent (a loss burst).
    pub repair_copies_refused: u64,
    /// NACKed packets not copied because the browser's loss read `COPY_MAX_LOSS` or more.
    pub repair_copies_skipped_loss: u64,
    /// NACKed packets not copied because str0m's pacer held a backlog.
    pub repair_copies_skipped_backlog: u64,
    /// Rate of video media sent over the last stats interval, bit/s.
    pub rate_bps: f64,
    /// Rate of audio payload sent over the last stats interval, bit/s.
    pub audio_rate_bps: f64,
    /// Edge-added latency of the last interval, from the arrival of a frame's last packet to
    /// the transmission of its last packet to this browser (median, microseconds).
    pub frame_latency_p50_us: Option<u64>,
}

/// A sent packet whose transmission time the latency figures need.
#[derive(Debug, Clone, Copy)]
struct Pending {
    seq: u16,
    frame_done: Instant,
    /// When the packet was written to str0m.
    written: Instant,
}

/// One browser.
pub struct Viewer {
    pub id: u64,
    pub session: String,
    rtc: Rtc,
    neg: Negotiated,
    video_ssrc: Option<u32>,
    connected: bool,
    closed: bool,
    timeout: Instant,
    pub fwd: Forwarder,
    pub sel: Selector,
    seq_video: u64,
    seq_audio: u64,
    stats: ViewerStats,
    signals: VecDeque<ViewerSignal>,
    pub created_at: Instant,
    pub connected_at: Option<Instant>,
    /// Bytes of video and of audio written since the last stats event.
    interval_bytes: u64,
    interval_audio_bytes: u64,
    /// The loss figure comes from transport-wide feedback (receiver reports no longer used).
    twcc_loss: bool,
    last_stats_at: Option<Instant>,
    /// Frames sent whose last packet has not been seen leaving yet.
    pending: VecDeque<Pending>,
    latencies: Vec<u64>,
    /// All latency samples (for the benchmark), when enabled.
    pub latency_log: Option<Vec<u64>>,
    /// Bytes of every datagram sent to the browser over the last `DEPARTURE_WINDOW`: while
    /// str0m's pacer holds a backlog this is its pacing rate, 1.1 × its current estimate.
    departures: VecDeque<(Instant, usize)>,
    departed_bytes: usize,
    backlog_checked: Option<Instant>,
    drop_repairs_at_key: bool,
    /// The second copy of each NACKed packet; its history is str0m's (`RtcSettings::rtx_history`),
    /// how long sent packets are kept for NACKs.
    resend: Resender,
    /// The loss burst the browser's NACKs show, ahead of str0m's loss figure.
    burst: NackBurst,
    /// When a burst last asked for a re-evaluation.
    burst_checked: Option<Instant>,
}

/// No second copies while the browser's loss is at least this: loss that heavy is congestion,
/// and the copies would add to it.
const COPY_MAX_LOSS: f32 = 0.10;

/// A NACK burst this heavy re-evaluates the layers at once.
const BURST_LOSS: f32 = 0.10;

/// While str0m's pacer holds a backlog this long, the layers are re-evaluated this often.
const BACKLOG_CHECK: Duration = Duration::from_millis(200);

/// How far ahead of the shell's clock a str0m deadline is still handled at once (`drain`):
/// str0m's pacer asks for its next packet 1 µs after the last; pacing intervals are
/// milliseconds.
const DUE: Duration = Duration::from_micros(100);

/// The window over which the rate of what leaves for the browser is measured.
const DEPARTURE_WINDOW: Duration = Duration::from_millis(500);

impl Viewer {
    pub fn new(
        id: u64,
        session: String,
        now: Instant,
        rtc: Rtc,
        neg: Negotiated,
        fwd: Forwarder,
        sel: Selector,
    ) -> Viewer {
        // Random sequence starts below 2^15 (the ROC stays 0, RFC 3711 needs no signalling).
        let mut v = Viewer {
            id,
            session,
            rtc,
            neg,
            video_ssrc: None,
            connected: false,
            closed: false,
            timeout: now,
            fwd,
            sel,
            seq_video: fastrand::u64(0..32_768),
            seq_audio: fastrand::u64(0..32_768),
            stats: ViewerStats::default(),
            signals: VecDeque::new(),
            created_at: now,
            connected_at: None,
            interval_bytes: 0,
            interval_audio_bytes: 0,
            twcc_loss: false,
            last_stats_at: None,
            pending: VecDeque::new(),
            latencies: Vec::new(),
            latency_log: None,
            departures: VecDeque::new(),
            departed_bytes: 0,
            backlog_checked: None,
            drop_repairs_at_key: false,
            resend: Resender::new(Duration::from_millis(1500)),
            burst: NackBurst::default(),
            burst_checked: None,
        };
        let mut api = v.rtc.direct_api();
        let ssrc = api.stream_tx_by_mid(neg.video, None).map(|s| *s.ssrc());
        v.video_ssrc = ssrc;
        v
    }

    /// How long str0m keeps this browser's sent packets for its NACKs.
    pub fn set_rtx_history(&mut self, d: Duration) {
        self.resend.set_history(d);
    }

    pub fn connected(&self) -> bool {
        self.connected
    }

    pub fn closed(&self) -> bool {
        self.closed
    }

    pub fn has_audio(&self) -> bool {
        self.neg.audio.is_some()
    }

    pub fn timeout(&self) -> Instant {
        self.resend
            .next_due()
            .map_or(self.timeout, |t| t.min(self.timeout))
    }

    pub fn stats(&self) -> ViewerStats {
        self.stats
    }

    /// The browser's loss for the layer choice: str0m's figure, or the depth of the loss
    /// burst the browser's NACKs show (`nack_burst`), whichever is larger.
    pub fn loss(&mut self, now: Instant) -> f32 {
        self.stats.loss.max(self.burst_loss(now).unwrap_or(0.0))
    }

    /// The depth of the loss burst the browser's NACKs show, if they show one.
    pub fn burst_loss(&mut self, now: Instant) -> Option<f32> {
        self.burst.loss(now)
    }

    /// The layers went down: a burst from now on is one of packets sent at the new rate.
    pub fn restart_burst(&mut self) {
        self.burst.restart_at(self.seq_video);
    }

    pub fn poll_signal(&mut self) -> Option<ViewerSignal> {
        self.signals.pop_front()
    }

    /// Whether this datagram is for this viewer.
    pub fn accepts(&self, input: &Input<'_>) -> bool {
        !self.closed && self.rtc.accepts(input)
    }

    pub fn handle_input(&mut self, now: Instant, input: Input<'_>, out: &mut VecDeque<Transmit>) {
        if self.closed {
            return;
        }
        if self.rtc.handle_input(input).is_err() {
            self.close();
            return;
        }
        self.drain(now, out);
        self.check_backlog(now);
    }

    /// Asks for a re-evaluation of the layers, at most every `BACKLOG_CHECK`, while str0m's
    /// pacer holds a backlog: it says the layers exceed str0m's estimate long before the
    /// next (smoothed) estimate event or statistics do.
    fn check_backlog(&mut self, now: Instant) {
        if self.pacer_backlog(now) >= BACKLOG_CHECK
            && self
                .backlog_checked
                .is_none_or(|t| now >= t + BACKLOG_CHECK)
        {
            self.backlog_checked = Some(now);
            self.signals.push_back(ViewerSignal::Estimate);
        }
    }

    pub fn handle_timeout(&mut self, now: Instant, out: &mut VecDeque<Transmit>) {
        if self.closed {
            return;
        }
        self.write_copies(now, out);
        if now < self.timeout {
            return;
        }
        if self.rtc.handle_input(Input::Timeout(now)).is_err() {
            self.close();
            return;
        }
        self.drain(now, out);
        self.check_backlog(now);
    }

    /// Ends the connection (DELETE, or the edge shutting down).
    pub fn disconnect(&mut self, now: Instant, out: &mut VecDeque<Transmit>) {
        if !self.closed {
            let _ = self.rtc.close();
            self.drain(now, out);
            self.rtc.disconnect();
        }
        self.close();
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.signals.push_back(ViewerSignal::Closed);
        }
    }

    /// Writes what the forwarder has queued to the video stream.
    pub fn write_video(&mut self, now: Instant, out: &mut VecDeque<Transmit>) {
        let mut wrote = false;
        while let Some(s) = self.fwd.poll_send() {
            if !self.connected || self.closed {
                continue;
            }
            wrote |= self.write_one_video(now, s);
        }
        if wrote {
            self.drain(now, out);
        }
    }

    /// Drops the repairs still owed once the next key picture is written: after a loss burst
    /// (a path step) str0m sends queued retransmissions before new media, and once a key
    /// picture is on its way they only delay it.
    pub fn drop_repairs_at_key(&mut self) {
        self.drop_repairs_at_key = true;
    }

    /// Hands one packet to str0m (sent by the next `drain`); whether it was written.
    fn write_one_video(&mut self, now: Instant, s: Send) -> bool {
        if s.key && self.drop_repairs_at_key {
            self.drop_repairs_at_key = false;
            let mut api = self.rtc.direct_api();
            if let Some(tx) = api.stream_tx_by_mid(self.neg.video, None) {
                // A new cache: resends queued for packets not in it are skipped.
                tx.set_rtx_cache(
                    4096,
                    self.resend.history(),
                    Some(crate::whep::RTX_RATIO_CAP),
                );
                self.stats.repair_drops += 1;
            }
            self.resend.clear_due();
        }
        let seq = self.seq_video;
        self.seq_video += 1;
        let len = s.payload.len();
        self.resend.on_sent(
            now,
            Sent {
                seq,
                payload: s.payload.clone(),
                timestamp: s.timestamp,
                marker: s.marker,
                at: s.at,
            },
        );
        let w = RtpWrite::new(
            self.neg.video_pt,
            SeqNo::from(seq),
            s.timestamp,
            s.at,
            s.payload,
        )
        .marker(s.marker)
        .nackable(true);
        let mut api = self.rtc.direct_api();
        let Some(tx) = api.stream_tx_by_mid(self.neg.video, None) else {
            return false;
        };
        tx.write_rtp(w);
        self.stats.media_packets += 1;
        self.interval_bytes += len as u64;
        if let Some(done) = s.frame_done {
            self.pending.push_back(Pending {
                seq: seq as u16,
                frame_done: done,
                written: now,
            });
            if self.pending.len() > 512 {
                self.pending.pop_front();
            }
        }
        true
    }

    /// Writes the second copies of NACKed packets that are due: their own sequence number,
    /// timestamp and marker on the media SSRC, not nackable (str0m keeps the first).
    fn write_copies(&mut self, now: Instant, out: &mut VecDeque<Transmit>) {
        let mut wrote = false;
        while let Some(p) = self.resend.poll_copy(now) {
            let mut api = self.rtc.direct_api();
            let Some(tx) = api.stream_tx_by_mid(self.neg.video, None) else {
                return;
            };
            tx.write_rtp(
                RtpWrite::new(
                    self.neg.video_pt,
                    SeqNo::from(p.seq),
                    p.timestamp,
                    p.at,
                    p.payload,
                )
                .marker(p.marker),
            );
            wrote = true;
        }
        if wrote {
            self.stats.repair_copies = self.resend.copies();
            self.drain(now, out);
        }
    }

    /// A NACK from the browser (str0m answers it with RTX): schedules the second copies,
    /// unless the path is congested (heavy loss, or str0m's pacer holding a backlog).
    fn on_nack(&mut self, now: Instant, ssrc: u32, entries: &[str0m::rtp::rtcp::NackEntry]) {
        if Some(ssrc) != self.video_ssrc {
            return;
        }
        let last = SeqNo::from(self.seq_video.saturating_sub(1));
        for e in entries {
            self.burst.on_nack(now, e.into_iter(last).map(|s| *s));
        }
        // A burst re-evaluates the layers at once (at most every `BACKLOG_CHECK`), not at
        // the next stats event.
        let loss = self.loss(now);
        if loss >= BURST_LOSS && self.burst_checked.is_none_or(|t| now >= t + BACKLOG_CHECK) {
            self.burst_checked = Some(now);
            self.signals.push_back(ViewerSignal::Estimate);
        }
        let skipped = if loss >= COPY_MAX_LOSS {
            Some(&mut self.stats.repair_copies_skipped_loss)
        } else if self.pacer_backlog(now) >= BACKLOG_CHECK {
            Some(&mut self.stats.repair_copies_skipped_backlog)
        } else {
            None
        };
        if let Some(count) = skipped {
            *count += entries
                .iter()
                .map(|e| e.into_iter(last).count() as u64)
                .sum::<u64>();
            return;
        }
        for e in entries {
            self.resend.on_nack(now, e.into_iter(last).map(|s| *s));
        }
        self.stats.repair_copies_refused = self.resend.refused();
    }

    /// Forwards one audio packet (Opus payload as it came, timestamp in the edge's space).
    pub fn write_audio(
        &mut self,
        now: Instant,
        payload: Arc<[u8]>,
        timestamp: u32,
        marker: bool,
        at: Instant,
        out: &mut VecDeque<Transmit>,
    ) {
        let Some((mid, pt)) = self.neg.audio else {
            return;
        };
        if !self.connected || self.closed {
            return;
        }
        let seq = self.seq_audio;
        self.seq_audio += 1;
        let mut api = self.rtc.direct_api();
        let Some(tx) = api.stream_tx_by_mid(mid, None) else {
            return;
        };
        let len = payload.len() as u64;
        tx.write_rtp(RtpWrite::new(pt, SeqNo::from(seq), timestamp, at, payload).marker(marker));
        self.stats.audio_packets += 1;
        self.interval_audio_bytes += len;
        self.drain(now, out);
    }

    /// Asks str0m's estimator to keep traffic up to `min_bps` and probe towards `desired_bps`.
    pub fn set_bwe_targets(
        &mut self,
        now: Instant,
        min_bps: f64,
        desired_bps: f64,
        out: &mut VecDeque<Transmit>,
    ) {
        if self.closed {
            return;
        }
        self.rtc.bwe().set_bitrate(
            str0m::bwe::Bitrate::bps(min_bps.max(0.0) as u64),
            str0m::bwe::Bitrate::bps(desired_bps.max(0.0) as u64),
        );
        self.drain(now, out);
    }

    /// Takes everything str0m has to say now, up to its next deadline in the future.
    ///
    /// str0m's pacer releases one packet per `handle_timeout` and then asks for another
    /// timeout 1 µs later. Left to the shell, each further packet of a burst the pacer allows
    /// now waits for a whole pass of the shell's loop over every browser (and, on a tokio
    /// timer, for its millisecond tick): with 200 browsers a 10-packet picture reached the
    /// last of them tens of milliseconds after it was complete. A deadline within [`DUE`] of
    /// `now` is handled here instead, so the burst leaves in this call. str0m's clock runs
    /// at most [`DUE`] ahead of the shell's, and a timeout that brings nothing out twice in
    /// a row is left to the shell.
    fn drain(&mut self, now: Instant, out: &mut VecDeque<Transmit>) {
        let mut idle = 0;
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    if t <= now + DUE && idle < 2 && !self.closed {
                        idle += 1;
                        if self.rtc.handle_input(Input::Timeout(t.max(now))).is_err() {
                            self.close();
                            return;
                        }
                        continue;
                    }
                    self.timeout = t;
                    return;
                }
                Ok(Output::Transmit(t)) => {
                    idle = 0;
                    let contents: Vec<u8> = t.contents.into();
                    self.on_transmit(now, &contents);
                    out.push_back(Transmit {
                        source: t.source,
                        destination: t.destination,
                        contents,
                    });
                }
                Ok(Output::Event(e)) => {
                    idle = 0;
                    self.on_event(now, e);
                }
                Err(_) => {
                    self.close();
                    return;
                }
            }
        }
    }

    /// How long the oldest frame written to str0m has been waiting there for its last packet
    /// to leave: str0m's pacer backlog. A frame normally leaves within a few tens of
    /// milliseconds (a key picture's burst within ~200 ms); a backlog that keeps growing
    /// means the layers sent exceed the pacing rate, i.e. str0m's own estimate has already
    /// fallen below them, before its smoothed estimate event says so.
    pub fn pacer_backlog(&self, now: Instant) -> Duration {
        self.pending
            .front()
            .map_or(Duration::ZERO, |p| now.saturating_duration_since(p.written))
    }

    /// The rate at which datagrams left for this browser over the last half second, bit/s.
    pub fn departure_rate(&mut self, now: Instant) -> f64 {
        self.expire_departures(now);
        self.departed_bytes as f64 * 8.0 / DEPARTURE_WINDOW.as_secs_f64()
    }

    fn expire_departures(&mut self, now: Instant) {
        while let Some(&(t, n)) = self.departures.front() {
            if now.saturating_duration_since(t) <= DEPARTURE_WINDOW {
                break;
            }
            self.departures.pop_front();
            self.departed_bytes -= n;
        }
    }

    /// Matches a first transmission of a frame's last packet with its arrival time.
    fn on_transmit(&mut self, now: Instant, b: &[u8]) {
        self.departures.push_back((now, b.len()));
        self.departed_bytes += b.len();
        self.expire_departures(now);
        if b.len() < 12 || b[0] >> 6 != 2 || (192..=223).contains(&b[1]) {
            return;
        }
        let ssrc = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        if Some(ssrc) != self.video_ssrc {
            return;
        }
        let seq = u16::from_be_bytes([b[2], b[3]]);
        while let Some(p) = self.pending.front().copied() {
            if p.seq == seq {
                self.pending.pop_front();
                let us = now.saturating_duration_since(p.frame_done).as_micros() as u64;
                self.latencies.push(us);
                if let Some(log) = &mut self.latency_log {
                    log.push(us);
                }
                break;
            }
            // Behind the packet now leaving: it left before (or never will).
            if (seq.wrapping_sub(p.seq) as i16) > 0 {
                self.pending.pop_front();
            } else {
                break;
            }
        }
    }

    fn on_event(&mut self, now: Instant, e: Event) {
        match e {
            Event::Connected => {
                self.connected = true;
                self.connected_at = Some(now);
                self.signals.push_back(ViewerSignal::Connected);
            }
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) | Event::Closed => {
                self.close();
            }
            Event::KeyframeRequest(r) if r.mid == self.neg.video => {
                match r.kind {
                    KeyframeRequestKind::Pli => self.stats.plis += 1,
                    KeyframeRequestKind::Fir => self.stats.firs += 1,
                }
                self.signals.push_back(ViewerSignal::KeyRequest);
            }
            Event::EgressBitrateEstimate(str0m::bwe::BweKind::Twcc { estimate, .. }) => {
                self.stats.estimate_bps = Some(estimate.as_f64());
                self.signals.push_back(ViewerSignal::Estimate);
            }
            Event::RawPacket(p) => {
                if let RawPacket::RtcpRx(Rtcp::Nack(n)) = *p {
                    let entries: Vec<_> = n.reports.iter().copied().collect();
                    self.on_nack(now, *n.ssrc, &entries);
                }
            }
            Event::PeerStats(p) => {
                if let Some(l) = p.egress_loss_fraction {
                    self.stats.loss = l;
                    self.twcc_loss = true;
                }
                if p.rtt.is_some() {
                    self.stats.rtt = p.rtt;
                }
            }
            Event::MediaEgressStats(m) if m.mid == self.neg.video => {
                self.stats.video_packets = m.packets;
                self.stats.video_bytes = m.bytes;
                self.stats.nacks = m.nacks;
                self.stats.rtx_packets = m.packets.saturating_sub(self.stats.media_packets);
                if let Some(r) = &m.remote {
                    self.stats.remote_lost = r.packets_lost;
                }
                if let Some(l) = m.loss.filter(|_| !self.twcc_loss) {
                    self.stats.loss = l;
                }
                if m.rtt.is_some() {
                    self.stats.rtt = m.rtt;
                }
                if let Some(last) = self.last_stats_at {
                    let dt = now.saturating_duration_since(last).as_secs_f64();
                    if dt > 0.0 {
                        self.stats.rate_bps = self.interval_bytes as f64 * 8.0 / dt;
                        self.stats.audio_rate_bps = self.interval_audio_bytes as f64 * 8.0 / dt;
                    }
                }
                self.interval_bytes = 0;
                self.interval_audio_bytes = 0;
                self.last_stats_at = Some(now);
                if !self.latencies.is_empty() {
                    self.latencies.sort_unstable();
                    self.stats.frame_latency_p50_us =
                        Some(self.latencies[self.latencies.len() / 2]);
                    self.latencies.clear();
                }
                self.signals.push_back(ViewerSignal::Estimate);
            }
            _ => {}
        }
    }

    /// The layers the browser decodes now.
    pub fn layers(&self) -> Choice {
        self.fwd.current()
    }
}

/// A datagram from the shell as str0m's input (None if it is not something str0m parses:
/// neither STUN, DTLS, RTP nor RTCP).
pub fn input<'a>(
    now: Instant,
    source: SocketAddr,
    destination: SocketAddr,
    contents: &'a [u8],
) -> Option<Input<'a>> {
    Some(Input::Receive(
        now,
        Receive {
            proto: Protocol::Udp,
            source,
            destination,
            contents: contents.try_into().ok()?,
        },
    ))
}
