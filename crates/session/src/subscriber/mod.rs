//! The receive side of a session, sans-IO: one per player (or edge).
//!
//! ```text
//! host                                   Subscriber
//! ----                                   ----------
//! SAM bytes / JSON description ------->  handle_announcement   verify, queue
//! keys from the description ---------->  handle_security
//! datagram (group, port, kernel time) ->  handle_datagram       open (AEAD), parse RTP + cc
//! deadline reached ------------------->  handle_timeout
//!                                        poll_output: apply announcements (layout, restart),
//!                                          then the queued packets in kernel-time order:
//!                                          retired SSRC? stale? quarantined? -> feed:
//!                                          SSRC change (restart hold), sequence extension,
//!                                          replay window, loss tally, controller,
//!                                          FEC repair, media (or the restart hold);
//!                                          controller timers, actions and decisions,
//!                                          key requests, the per-second snapshot
//! Join/Leave, Transmit, Media, Event  <-  poll_output            ... and finally Timeout(t)
//! ```
//!
//! Inputs are queued and processed at the next `poll_output` (or `handle_timeout`), so that
//! everything one host turn drained from its sockets is handled together: the announcements
//! first (a restarted sender's new session is seen before its packets), then the packets
//! sorted by kernel receive time across sockets.
//!
//! Time: `now` and receive times are one clock, the player's `CLOCK_REALTIME` (kernel
//! timestamps). SAM freshness is checked against it as Unix time.

mod audio_in;
mod config;
mod driver;
mod feedback;
mod input;
pub mod limbo;
mod membership;
pub mod nack;
pub mod output;
mod packets;
pub mod repair;
pub mod replay;
pub mod sam_gate;
mod snapshot;
pub mod stale;
pub mod stream;
pub mod tfmcc;

pub use config::{Announcement, Control, Security, SubscriberConfig};
use driver::Driver;
pub use limbo::{Held, LimboStats};
pub use nack::RtxStats;
pub use output::{
    Drops, Endpoint, Event, Media, Output, SamStats, Snapshot, TimeoutReason, Transmit,
    TransmitKind,
};
pub use repair::FecStats;
pub use tfmcc::TfmccView;

use crate::audio::{AudioReceive, AudioStats};
use congestion::estimators::SeqEvent;
use congestion::tfmcc::{TfmccConfig, TfmccReceiver};
use congestion::wire::cc_ext::{self, CcFields};
use congestion::{Action, LayeredController, PacketArrival};
use limbo::Limbo;
use proto::rtp::RtpPacket;
use proto::wire::request::{MediaRequest, Nack, RequestKind};
use proto::{SessionInfo, Time};
use replay::Verdict;
use security::auth::{MediaOpener, ReceiverKey, SamVerifier};
use stale::StaleFilter;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;
use stream::{Pkt, Stream, HELD_SLACK_US};

/// A joining receiver that has decoded nothing asks for a key picture again after this long
/// (a lost request, or a sender that was rate-limiting requests).
pub const KEY_REQUEST_RETRY: Duration = Duration::from_millis(1500);

/// Period of the [`Snapshot`].
pub const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// SSRCs remembered as a new sender instance's (bounded).
const MAX_NEW_SSRCS: usize = 64;
/// SAM signature checks a second at most (burst twice that): the announcement interval is
/// about a second, so genuine SAMs of a few sessions fit many times over (F10).
const SAM_VERIFY_PER_SEC: f64 = 50.0;
/// Bad signatures ask for the description again only after no SAM verified for this long.
const SAM_QUIET: Duration = Duration::from_secs(3);

#[derive(Default, Clone, Debug)]
struct Counters {
    packets: u64,
    bytes: u64,
    lost: u64,
}

/// Per-interval tallies for the snapshot.
#[derive(Default)]
struct Tally {
    total: Counters,
    sec: Counters,
    gaps_ns: Vec<u64>,
    last_pkt: Option<Time>,
    max_gap_ns: u64,
    first_packet: Option<Time>,
}

/// The receive side of one session.
pub struct Subscriber {
    cfg: SubscriberConfig,
    driver: Driver,
    info: Option<SessionInfo>,
    /// Per transport layer: held.
    held: Vec<bool>,
    streams: Vec<Stream>,
    pending_anns: Vec<SessionInfo>,
    batch: Vec<Pkt>,
    out: VecDeque<Output>,
    now: Time,
    /// Monotonic time given to the controller (held packets are fed late).
    ctl_now: Time,
    stale: StaleFilter,
    limbo: Limbo,
    repair: repair::Repair,
    /// The audio track's receive side (a session with one, media delivered).
    audio: Option<AudioReceive>,
    /// SSRCs of the session before the current one.
    retired: Vec<u32>,
    /// SSRCs that replaced another since the current session was accepted.
    new_ssrcs: Vec<u32>,
    drops: Drops,
    tally: Tally,
    first_join: Option<Time>,
    // Security.
    security_ready: bool,
    sam: Option<SamVerifier>,
    sam_pinned: bool,
    opener: Option<MediaOpener>,
    ssm: Option<Ipv4Addr>,
    report_key: Option<ReceiverKey>,
    auth_failures_seen: u64,
    sam_gate: sam_gate::SamGate,
    // Feedback.
    awaiting_key: bool,
    last_key_request: Option<Time>,
    feedback_no_address: u64,
    feedback_seal_errors: u64,
    bad_extension: u64,
    rtx: RtxStats,
    // Stats.
    started: Option<Time>,
    next_stats: Option<Time>,
    last_stats: Option<Time>,
    exited: bool,
}

impl Subscriber {
    /// A receiver driven by `control` that joins nothing before its first announcement.
    pub fn new(control: Control, mut cfg: SubscriberConfig) -> Subscriber {
        let driver = match control {
            Control::Fixed(n) => Driver::Fixed { n, target: 0 },
            Control::Layered(c) => Driver::Layered(c),
            Control::Tfmcc { rid } => {
                Driver::Tfmcc(Box::new(TfmccReceiver::new(TfmccConfig::default(), rid)))
            }
        };
        let sam = cfg.pinned_sam.take();
        Subscriber {
            security_ready: !cfg.await_security,
            sam_pinned: sam.is_some(),
            sam,
            ssm: cfg.ssm,
            cfg,
            driver,
            info: None,
            held: Vec::new(),
            streams: Vec::new(),
            pending_anns: Vec::new(),
            batch: Vec::new(),
            out: VecDeque::new(),
            now: Time::ZERO,
            ctl_now: Time::ZERO,
            stale: StaleFilter::default(),
            limbo: Limbo::default(),
            repair: repair::Repair::default(),
            audio: None,
            retired: Vec::new(),
            new_ssrcs: Vec::new(),
            drops: Drops::default(),
            tally: Tally::default(),
            first_join: None,
            opener: None,
            report_key: None,
            auth_failures_seen: 0,
            sam_gate: sam_gate::SamGate::new(SAM_VERIFY_PER_SEC),
            awaiting_key: false,
            last_key_request: None,
            feedback_no_address: 0,
            feedback_seal_errors: 0,
            bad_extension: 0,
            rtx: RtxStats::default(),
            started: None,
            next_stats: None,
            last_stats: None,
            exited: false,
        }
    }

    // ---------------------------------------------------------------- getters

    /// The session description in force.
    pub fn info(&self) -> Option<&SessionInfo> {
        self.info.as_ref()
    }

    /// Number of transport layers held.
    pub fn layers_held(&self) -> usize {
        self.held.iter().filter(|h| **h).count()
    }

    /// Packets received and counted lost since start.
    pub fn totals(&self) -> (u64, u64) {
        (self.tally.total.packets, self.tally.total.lost)
    }

    /// The drop counters.
    pub fn drops(&self) -> &Drops {
        &self.drops
    }

    /// The FEC counters (streams with repair).
    pub fn fec_stats(&self) -> FecStats {
        self.repair.stats()
    }

    /// The retransmission counters.
    pub fn rtx_stats(&self) -> RtxStats {
        self.rtx
    }

    /// The audio track's receive side, when the session has one.
    pub fn audio(&self) -> Option<&AudioReceive> {
        self.audio.as_ref()
    }

    /// The audio track's counters.
    pub fn audio_stats(&self) -> Option<AudioStats> {
        self.audio.as_ref().map(AudioReceive::stats)
    }

    /// Whether a new audio sender instance began since the last call (the host's clock
    /// mapping from its sender reports is stale).
    pub fn take_audio_new_instance(&mut self) -> bool {
        self.audio
            .as_mut()
            .is_some_and(AudioReceive::take_new_instance)
    }

    /// The video needs `by` more delay than the audio gives: the audio (the clock the video
    /// follows) plays everything from its next frame on that much later, once.
    pub fn delay_audio(&mut self, by: Duration) {
        if let Some(a) = self.audio.as_mut() {
            a.delay_later(by.as_nanos() as u64);
        }
    }

    /// The video would still be shown in time with the audio (the clock it follows) `by`
    /// earlier: the audio lowers its delay by as much of that as its own packets allow, never
    /// below the delay it started with, by cutting short the frames it plays
    /// (`AudioReceive::lower_delay`). Returns what it will lower.
    pub fn lower_audio_delay(&mut self, by: Duration) -> Duration {
        self.audio.as_mut().map_or(Duration::ZERO, |a| {
            Duration::from_nanos(a.lower_delay(by.as_nanos() as u64))
        })
    }

    /// The host cut `samples` (per channel) out of the audio frame it was just given (at most
    /// its `may_cut`): the audio plays on that much earlier.
    pub fn audio_shortened(&mut self, samples: usize) {
        if let Some(a) = self.audio.as_mut() {
            a.shortened(samples);
        }
    }

    /// The audio's playout delay now (after its first packet's arrival), if it has a track.
    pub fn audio_delay(&self) -> Option<Duration> {
        self.audio
            .as_ref()
            .map(|a| Duration::from_nanos(a.delay_ns()))
    }

    /// The host could not decode the audio frame `f` it was given.
    pub fn audio_decode_failed(&mut self, f: &crate::audio::PlayFrame) {
        if let Some(a) = self.audio.as_mut() {
            a.decode_failed(f);
        }
    }

    /// The TFMCC receiver's view, for a TFMCC subscriber.
    pub fn tfmcc(&self) -> Option<TfmccView> {
        match &self.driver {
            Driver::Tfmcc(r) => Some(TfmccView::of(r, self.now, self.bad_extension)),
            _ => None,
        }
    }

    /// The controller's statistics.
    pub fn controller_stats(&self) -> Option<congestion::Stats> {
        self.driver.ctl_ref().map(|c| c.stats())
    }

    // ---------------------------------------------------------------- inputs

    pub(super) fn advance(&mut self, now: Time) {
        self.now = self.now.max(now);
        if self.started.is_none() {
            self.started = Some(now);
            self.next_stats = Some(now + STATS_INTERVAL);
            self.last_stats = Some(now);
        }
    }

    /// A deadline from [`Output::Timeout`] was reached (early or repeated calls are harmless).
    pub fn handle_timeout(&mut self, now: Time) {
        self.advance(now);
        self.process();
    }

    /// The host's decoder has decoded nothing yet (`true`) or has (`false`): while it has not
    /// and the base layer is held, key pictures are asked for every [`KEY_REQUEST_RETRY`].
    pub fn set_awaiting_key(&mut self, awaiting: bool) {
        self.awaiting_key = awaiting;
    }

    /// Asks the sender to re-sync spatial layer `spatial` (1..=7), which the host just
    /// started to receive and cannot decode before its next switch point.
    pub fn request_resync(&mut self, now: Time, spatial: u8) {
        self.advance(now);
        if (1..8).contains(&spatial) {
            self.send_request(RequestKind::Resync(spatial), TransmitKind::Resync(spatial));
        }
    }

    /// Leaves the session: the controller says goodbye (TFMCC's leave report) and every group
    /// is left. Outputs follow from `poll_output`.
    pub fn close(&mut self, now: Time) {
        self.advance(now);
        self.process();
        if let Some(c) = self.driver.ctl() {
            c.handle_close(now);
        }
        self.drain_controller();
        for s in std::mem::take(&mut self.streams) {
            self.out
                .push_back(Output::Leave(self.endpoint(s.layer, s.group, s.port)));
        }
        self.held.iter_mut().for_each(|h| *h = false);
        self.exited = true;
    }

    // ---------------------------------------------------------------- output

    /// The next output; [`Output::Timeout`] when there is nothing else to do.
    #[must_use]
    pub fn poll_output(&mut self) -> Output {
        if self.out.is_empty() {
            self.process();
        }
        self.out.pop_front().unwrap_or_else(|| self.next_timeout())
    }

    fn next_timeout(&self) -> Output {
        let mut best = (Time::NEVER, TimeoutReason::Stats);
        let mut consider = |t: Option<Time>, r: TimeoutReason| {
            if let Some(t) = t {
                if t < best.0 {
                    best = (t, r);
                }
            }
        };
        if let Some((t, r)) = self.driver.ctl_ref().and_then(|c| c.poll_timeout()) {
            consider(Some(t), TimeoutReason::Controller(r));
        }
        for s in &self.streams {
            consider(s.quarantine_due(), TimeoutReason::Quarantine);
            consider(s.missing.next_due(), TimeoutReason::Retransmit);
        }
        consider(self.limbo.deadline(), TimeoutReason::Limbo);
        consider(
            self.audio.as_ref().and_then(|a| a.next_due()).map(Time),
            TimeoutReason::AudioPlayout,
        );
        if self.key_requests_due() {
            consider(
                Some(
                    self.last_key_request
                        .map_or(self.now, |t| t + KEY_REQUEST_RETRY),
                ),
                TimeoutReason::KeyRequest,
            );
        }
        consider(self.next_stats, TimeoutReason::Stats);
        Output::Timeout(best.0, best.1)
    }

    // ---------------------------------------------------------------- processing

    fn process(&mut self) {
        let now = self.now;
        for info in std::mem::take(&mut self.pending_anns) {
            self.apply_announcement(now, info);
        }
        let mut batch = std::mem::take(&mut self.batch);
        batch.sort_by_key(|p| p.recv_time);
        for p in batch {
            self.admit(p);
        }
        self.release_quarantines(now);
        self.retransmit_requests(now);
        if let Some(a) = self.audio.as_mut() {
            while let Some(o) = a.poll(now.as_nanos()) {
                self.out.push_back(Output::Audio(o));
            }
        }
        if self.limbo.expired(now) {
            // No new announcement in time: the SSRC change was not a new session.
            let held = self.limbo.release(self.cfg.deliver_media, false);
            self.deliver_held(held);
        }
        if let Some(c) = self.driver.ctl() {
            if c.poll_timeout().is_some_and(|(t, _)| now >= t) {
                c.handle_timeout(now);
            }
        }
        self.drain_controller();
        self.fixed_joins();
        // Announcements that stop verifying or packets that stop opening: ask for the
        // description again.
        // Forged SAMs alone do not count while genuine ones still verify (F10).
        let sam_failing = self.sam_gate.quiet_for(SAM_QUIET, now);
        let failures = self
            .sam
            .as_ref()
            .filter(|_| sam_failing)
            .map_or(0, |v| v.stats().bad_signature)
            + self.drops.media_auth_failed;
        if failures > self.auth_failures_seen {
            self.auth_failures_seen = failures;
            self.out.push_back(Output::Event(Event::RefreshSecurity));
        }
        self.key_requests(now);
        if self.next_stats.is_some_and(|t| now >= t) {
            self.snapshot(now);
        }
    }

    pub(super) fn endpoint(&self, layer: u8, group: Ipv4Addr, port: u16) -> Endpoint {
        Endpoint {
            layer,
            group,
            port,
            source: self.ssm,
        }
    }
}

fn same_layout(a: &SessionInfo, b: &SessionInfo) -> bool {
    a.layers == b.layers && a.packet_size == b.packet_size && a.bunch_len == b.bunch_len
}

#[cfg(test)]
mod tests;
