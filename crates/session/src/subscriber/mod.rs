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

mod feedback;
pub mod limbo;
mod membership;
pub mod output;
pub mod repair;
pub mod replay;
pub mod sam_gate;
mod snapshot;
pub mod stale;
pub mod stream;
pub mod tfmcc;

pub use limbo::{Held, LimboStats};
pub use output::{
    Drops, Endpoint, Event, Media, Output, SamStats, Snapshot, TimeoutReason, Transmit,
    TransmitKind,
};
pub use repair::FecStats;
pub use tfmcc::TfmccView;

use congestion::tfmcc::{TfmccConfig, TfmccReceiver};
use congestion::wire::cc_ext::{self, CcFields};
use congestion::{Action, LayeredController, PacketArrival};
use limbo::Limbo;
use proto::rtp::RtpPacket;
use proto::wire::request::{MediaRequest, RequestKind};
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

/// What drives the subscription.
pub enum Control {
    /// No controller: hold layers `0..n` (measurement mode).
    Fixed(u8),
    /// A receiver-driven layered controller (`congestion::factory`, or a research baseline).
    Layered(Box<dyn LayeredController>),
    /// A TFMCC receiver with this receiver id (its reports go to the feedback port).
    Tfmcc { rid: u32 },
}

/// How a Subscriber is set up.
pub struct SubscriberConfig {
    /// Deliver media packets ([`Output::Media`]) and hold a restarted sender's media.
    pub deliver_media: bool,
    /// Ignore multicast SAMs until [`Subscriber::handle_security`] was called (the host
    /// fetches a description that may pin a key, name an SSM source or carry the media key:
    /// a SAM taken before it would join layers any-source and unauthenticated).
    pub await_security: bool,
    /// A pinned SAM key (never replaced by a description's).
    pub pinned_sam: Option<SamVerifier>,
    /// Source-specific joins to this source (else the description's, unless `ssm_any`).
    pub ssm: Option<Ipv4Addr>,
    pub ssm_any: bool,
    /// Where reports and requests go instead of the announced sender's feedback port.
    pub feedback_override: Option<SocketAddrV4>,
    /// The sender's address when the announcement's is 0.0.0.0 (a sender bound to all
    /// interfaces): the host of the description URL.
    pub feedback_fallback_host: Option<Ipv4Addr>,
    /// Send key-picture and re-sync requests.
    pub media_requests: bool,
}

impl Default for SubscriberConfig {
    /// Media delivered, no security wait, media requests on.
    fn default() -> SubscriberConfig {
        SubscriberConfig {
            deliver_media: true,
            await_security: false,
            pinned_sam: None,
            ssm: None,
            ssm_any: false,
            feedback_override: None,
            feedback_fallback_host: None,
            media_requests: true,
        }
    }
}

/// Keys and sources from the session description.
#[derive(Default)]
pub struct Security {
    pub sam: Option<SamVerifier>,
    pub opener: Option<MediaOpener>,
    pub ssm: Option<Ipv4Addr>,
    pub report_key: Option<ReceiverKey>,
}

/// An announcement as the host received it.
pub enum Announcement<'a> {
    /// A SAM datagram from the announcement group.
    Sam(&'a [u8]),
    /// The JSON description served over HTTP (or read from a file).
    Json(&'a [u8]),
    /// A description the host already has in hand.
    Info(SessionInfo),
}

enum Driver {
    Fixed { n: u8, target: u8 },
    Layered(Box<dyn LayeredController>),
    Tfmcc(Box<TfmccReceiver>),
}

impl Driver {
    fn ctl(&mut self) -> Option<&mut dyn LayeredController> {
        match self {
            Driver::Fixed { .. } => None,
            Driver::Layered(c) => Some(c.as_mut()),
            Driver::Tfmcc(r) => Some(r.as_mut()),
        }
    }
    fn ctl_ref(&self) -> Option<&dyn LayeredController> {
        match self {
            Driver::Fixed { .. } => None,
            Driver::Layered(c) => Some(c.as_ref()),
            Driver::Tfmcc(r) => Some(r.as_ref()),
        }
    }
}

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

    fn advance(&mut self, now: Time) {
        self.now = self.now.max(now);
        if self.started.is_none() {
            self.started = Some(now);
            self.next_stats = Some(now + STATS_INTERVAL);
            self.last_stats = Some(now);
        }
    }

    /// An announcement arrived.
    pub fn handle_announcement(&mut self, now: Time, ann: Announcement<'_>) {
        self.advance(now);
        match ann {
            Announcement::Info(info) => self.queue_description(info),
            Announcement::Json(body) => match serde_json::from_slice::<SessionInfo>(body) {
                Ok(info) => self.queue_description(info),
                Err(_) => self.drops.malformed_announcement += 1,
            },
            Announcement::Sam(buf) => {
                if !self.security_ready {
                    self.drops.sam_before_description += 1;
                    return;
                }
                // With a verifier only verified SAMs count (it counts the rest by reason);
                // without one, any well-formed SAM.
                match self.sam.as_mut() {
                    Some(_) if !self.sam_gate.admit(buf, now) => {}
                    Some(v) => match v.verify(buf, now.as_nanos() / 1_000_000) {
                        Ok(ok) => {
                            self.sam_gate.verified(&ok.info, now);
                            self.pending_anns.push(ok.info)
                        }
                        Err(
                            proto::Error::Truncated { .. }
                            | proto::Error::Malformed { .. }
                            | proto::Error::Invalid { .. },
                        ) => self.drops.malformed_sam += 1,
                        Err(_) => {}
                    },
                    None => match proto::wire::sam::decode(buf) {
                        Ok(d) => self.pending_anns.push(d.info),
                        Err(_) => self.drops.malformed_sam += 1,
                    },
                }
            }
        }
    }

    fn queue_description(&mut self, info: SessionInfo) {
        match proto::wire::sam::validate(&info) {
            Ok(()) => self.pending_anns.push(info),
            Err(_) => self.drops.malformed_announcement += 1,
        }
    }

    /// The session description's keys and source arrived (again).
    pub fn handle_security(&mut self, now: Time, sec: Security) {
        self.advance(now);
        self.security_ready = true;
        // A key from the description replaces the one in use when it differs (the sender
        // restarted with a new key); a pinned key never changes, and the same key keeps its
        // verifier (and so its replay window).
        if !self.sam_pinned {
            if let Some(new) = sec.sam {
                if self.sam.as_ref().map(|v| v.key_id()) != Some(new.key_id()) {
                    self.sam = Some(new);
                }
            }
        }
        if self.cfg.ssm.is_none() && !self.cfg.ssm_any {
            self.ssm = sec.ssm;
        }
        self.opener = sec.opener;
        self.report_key = sec.report_key;
    }

    /// The media keys were fetched again (ahead of a key rotation): the opener in use takes
    /// them, keeping its counters. Without an opener (not encrypted, or no description yet)
    /// they are ignored.
    pub fn handle_media_keys(&mut self, now: Time, fresh: MediaOpener) {
        self.advance(now);
        if let Some(o) = self.opener.as_mut() {
            o.merge(fresh);
        }
    }

    /// A datagram too large for the host's buffer arrived on a data socket.
    pub fn handle_truncated(&mut self) {
        self.drops.truncated += 1;
    }

    /// A SAM too large for the host's buffer arrived on the announcement socket.
    pub fn handle_truncated_sam(&mut self) {
        self.drops.malformed_sam += 1;
    }

    /// A datagram arrived on the socket of `group:port` at kernel time `recv_time`.
    pub fn handle_datagram(
        &mut self,
        now: Time,
        group: Ipv4Addr,
        port: u16,
        recv_time: Time,
        bytes: &[u8],
    ) {
        self.advance(now);
        let Some(layer) = self
            .streams
            .iter()
            .find(|s| s.group == group && s.port == port)
            .map(|s| s.layer)
        else {
            self.drops.wrong_layer += 1;
            return;
        };
        let size = bytes.len() as u32;
        // Encrypted session: authenticate and decrypt first; the wire size still counts for
        // rates, the kernel time for timing.
        let opened;
        let data: &[u8] = match self.opener.as_mut() {
            Some(o) => match o.open(bytes) {
                Ok(p) => {
                    opened = p.packet;
                    &opened
                }
                Err(_) => {
                    self.drops.media_auth_failed += 1;
                    return;
                }
            },
            None => bytes,
        };
        let Ok(p) = RtpPacket::parse(data) else {
            self.drops.malformed_rtp += 1;
            return;
        };
        let Some(ext) = p.extension(cc_ext::DEFAULT_ID) else {
            self.drops.missing_cc += 1;
            return;
        };
        let Ok(cc) = CcFields::parse(ext) else {
            self.drops.bad_cc += 1;
            return;
        };
        if cc.layer != layer {
            self.drops.wrong_layer += 1;
            return;
        }
        let tfmcc = matches!(self.driver, Driver::Tfmcc(_));
        self.batch.push(Pkt {
            recv_time,
            group,
            port,
            cc,
            seq: p.sequence_number(),
            ssrc: p.ssrc(),
            size,
            padding: p.payload().is_empty(),
            data: if self.cfg.deliver_media {
                data.to_vec()
            } else {
                Vec::new()
            },
            ext: if tfmcc {
                tfmcc::extension_block(data)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default()
            } else {
                Vec::new()
            },
        });
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
        }
        consider(self.limbo.deadline(), TimeoutReason::Limbo);
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

    /// Drops a queued packet for the reasons that need no layer state, then quarantines or
    /// feeds it.
    fn admit(&mut self, p: Pkt) {
        if self.retired.contains(&p.ssrc) {
            self.drops.old_session += 1;
            return;
        }
        if self.stale.is_stale(p.recv_time, p.offset_us()) {
            self.drops.stale += 1;
            return;
        }
        // A packet queued before an announcement that changed the layout may name a group no
        // longer held.
        let Some(i) = self.stream_index(p.group, p.port) else {
            self.drops.wrong_layer += 1;
            return;
        };
        let s = &mut self.streams[i];
        if s.quarantine {
            s.first_held.get_or_insert(p.recv_time);
            s.held.push(p);
            return;
        }
        self.feed(i, p);
    }

    fn stream_index(&self, group: Ipv4Addr, port: u16) -> Option<usize> {
        self.streams
            .iter()
            .position(|s| s.group == group && s.port == port)
    }

    fn release_quarantines(&mut self, now: Time) {
        for i in 0..self.streams.len() {
            let due = self.streams[i].quarantine_due();
            if due.is_none_or(|d| now < d) {
                continue;
            }
            let mut held = std::mem::take(&mut self.streams[i].held);
            let before = held.len();
            held.retain(|p| !self.retired.contains(&p.ssrc));
            self.drops.old_session += (before - held.len()) as u64;
            let m = held.iter().map(Pkt::offset_us).min().unwrap_or(0);
            let m = self.stale.min_offset().map_or(m, |g| g.min(m));
            for p in held {
                if p.offset_us() > m + HELD_SLACK_US {
                    self.drops.stale += 1;
                } else {
                    self.feed(i, p);
                }
            }
            let s = &mut self.streams[i];
            s.quarantine = false;
            s.first_held = None;
        }
    }

    /// Hands one packet to the controller and the media output, and keeps the tallies.
    fn feed(&mut self, i: usize, mut p: Pkt) {
        let ts = p.recv_time;
        let deliver =
            self.cfg.deliver_media && self.info.as_ref().is_some_and(|i| !i.tracks.is_empty());
        let s = &mut self.streams[i];
        if s.ssrc != Some(p.ssrc) {
            if s.ssrc.is_some() {
                // A stream already received changed SSRC: a new sender instance whose
                // announcement is not accepted yet. Hold its media until it is.
                if deliver {
                    self.limbo.begin(ts);
                }
                if self.new_ssrcs.len() < MAX_NEW_SSRCS && !self.new_ssrcs.contains(&p.ssrc) {
                    self.new_ssrcs.push(p.ssrc);
                }
                s.prev_ssrc = s.ssrc;
            }
            // New sender instance (restart): new sequence space, not a loss burst.
            s.ext.reset();
            s.highest = None;
            s.bunch_start = None;
            s.replay = replay::ReplayWindow::default();
            s.ssrc = Some(p.ssrc);
        }
        let e = s.ext.extend(p.seq);
        match s.replay.check(e) {
            Verdict::Fresh => {}
            Verdict::Duplicate => {
                self.drops.duplicate += 1;
                return;
            }
            Verdict::TooOld => {
                self.drops.too_old += 1;
                return;
            }
        }
        let t = &mut self.tally;
        if let Some(h) = s.highest {
            if e > h + 1 {
                t.total.lost += e - h - 1;
                t.sec.lost += e - h - 1;
                self.repair.note_lost(p.ssrc, e - h - 1);
            }
        }
        if s.highest.is_none_or(|h| e > h) {
            s.highest = Some(e);
        }
        // Bunch spacing (diagnostics; the controller keeps its own).
        let cc = p.cc;
        if cc.bunch_pos == 0 {
            s.bunch_start = Some((e, ts));
        } else if let Some((s0, t0)) = s.bunch_start {
            if cc.bunch_pos + 1 == cc.bunch_len && e == s0 + cc.bunch_pos as u64 && ts > t0 {
                t.gaps_ns
                    .push(ts.saturating_since(t0).as_nanos() as u64 / cc.bunch_pos as u64);
                s.bunch_start = None;
            }
        }
        let layer = s.layer;
        if let Some(prev) = t.last_pkt {
            t.max_gap_ns = t
                .max_gap_ns
                .max(ts.saturating_since(prev).as_nanos() as u64);
        }
        t.last_pkt = Some(t.last_pkt.map_or(ts, |x| x.max(ts)));
        t.first_packet.get_or_insert(ts);
        t.total.packets += 1;
        t.total.bytes += p.size as u64;
        t.sec.packets += 1;
        t.sec.bytes += p.size as u64;
        self.stale.note(ts, p.offset_us());
        // Held packets are fed late: keep `now` monotonic for the controller, while the
        // arrival itself carries its true kernel timestamp.
        self.ctl_now = self.ctl_now.max(ts);
        let ctl_now = self.ctl_now;
        if let Some(c) = self.driver.ctl() {
            let arr = PacketArrival {
                layer: cc.layer,
                seq: e,
                bunch_pos: cc.bunch_pos,
                bunch_len: cc.bunch_len,
                size: p.size,
                send_time_us: cc.send_time_us,
                recv_time: ts,
            };
            if c.handle_packet_extended(ctl_now, &arr, &p.ext).is_err() {
                self.bad_extension += 1;
            }
        }
        if !deliver || p.padding {
            return;
        }
        let held = Held {
            layer,
            ssrc: p.ssrc,
            recv_time: ts,
            packet: std::mem::take(&mut p.data),
        };
        if self.limbo.active() {
            self.limbo.push(held);
        } else {
            self.deliver_held(vec![held]);
        }
    }

    fn endpoint(&self, layer: u8, group: Ipv4Addr, port: u16) -> Endpoint {
        Endpoint {
            layer,
            group,
            port,
            source: self.ssm,
        }
    }

    fn drain_controller(&mut self) {
        let mut actions = Vec::new();
        let mut decisions = Vec::new();
        if let Some(c) = self.driver.ctl() {
            while let Some(a) = c.poll_action() {
                actions.push(a);
            }
            while let Some(d) = c.poll_decision() {
                decisions.push(d);
            }
        }
        for d in decisions {
            self.out.push_back(Output::Event(Event::Decision(d)));
        }
        for a in actions {
            match a {
                Action::Join(k) if !self.exited => self.join(k),
                Action::Join(_) => {}
                Action::Leave(k) => self.leave(k),
                Action::Exit => {
                    for k in 0..self.held.len() as u8 {
                        self.leave(k);
                    }
                    self.out.push_back(Output::Event(Event::Exit));
                }
                Action::SendFeedback(b) => self.send_report(b),
            }
        }
    }
}

fn same_layout(a: &SessionInfo, b: &SessionInfo) -> bool {
    a.layers == b.layers && a.packet_size == b.packet_size && a.bunch_len == b.bunch_len
}

#[cfg(test)]
mod tests;
