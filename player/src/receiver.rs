//! The receive loop: announcements in, packets in (kernel timestamps), controller decisions
//! out as IGMP joins/leaves; once a second a log line, a telemetry post and a metrics update.

use crate::error::{Error, Result};
use crate::http_client;
use crate::net::{self, McastSocket};
use crate::Args;
use codec::rtp::RtpPacket;
use congestion::wire::cc_ext::{self, CcFields, SeqExtender};
use congestion::{Action, Decision, LayeredController, PacketArrival, SessionInfo, Time};
use serde_json::{json, Value};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Per-layer receive state.
#[derive(Default)]
struct Layer {
    sock: Option<McastSocket>,
    ext: SeqExtender,
    ssrc: Option<u32>,
    /// The SSRC before the last change (a restarted sender's predecessor).
    prev_ssrc: Option<u32>,
    highest: Option<u64>,
    /// First packet of the bunch in progress: (extended seq, kernel time ns).
    bunch_start: Option<(u64, u64)>,
    /// Newly joined: packets are held until `QUARANTINE_NS` after the first one arrived.
    quarantine: bool,
    held: Vec<Pkt>,
    first_held: Option<u64>,
}

/// One received, parsed data packet.
#[derive(Clone, Debug)]
struct Pkt {
    ts: u64,
    layer: usize,
    cc: CcFields,
    seq: u16,
    ssrc: u32,
    size: usize,
    /// The datagram (for the video path).
    data: Vec<u8>,
    /// Its RTP header-extension block (TFMCC only, see `crate::tfmcc`).
    ext: Vec<u8>,
}

impl Pkt {
    /// Receive time minus send time, µs: path delay plus the clocks' offset. Only differences
    /// between packets matter.
    fn offset_us(&self) -> i64 {
        (self.ts / 1_000) as i64 - self.cc.send_time_us as i64
    }
}

/// A packet whose delay exceeds the smallest recent one by this much is stale: it sat in a
/// queue (typically the kernel's unresolved-route queue at the multicast router, which holds
/// the first packets of a group from before anyone joined and forwards them when the route
/// is installed, seconds later). Fed to a controller it would read as a burst of loss.
const STALE_US: i64 = 500_000;
/// An unbroken run of stale packets this long (arrival time) means the path's delay rose for
/// good, not a flushed router queue: the delay floor is rebuilt (`Tally::is_stale`).
const RESTALE_NS: u64 = 1_000_000_000;
/// How long a newly joined layer's first packets are held so stale ones can be told apart.
const QUARANTINE_NS: u64 = 150_000_000;
/// Held packets more delayed than the least delayed one by this much are dropped as stale.
const HELD_SLACK_US: i64 = 100_000;

/// Video packets of a new sender instance, held until its announcement is accepted.
///
/// Why: a restarted sender (new SSRCs on the same groups) starts sending before the player has
/// accepted its announcement (the new signing key has to be fetched first, up to about a
/// second). Its first packets carry the new encoder's first key picture; pushed into the old
/// session's video path they were thrown away with it when the path was rebuilt for the new
/// session, and the decoder then waited for the next key picture: 2.5-2.8 s to decode again
/// instead of 0.2 s (docs/reliability.md, "sender restart"). Held here, they are fed to the new
/// path as soon as it exists.
///
/// Bounded in packets, bytes and time. When full, newer packets are refused (counted), not
/// older ones: the oldest hold the key picture the new path needs first. Entered only when a
/// layer the player already receives changes SSRC, so a first join never waits here.
#[derive(Default)]
struct Limbo {
    /// Kernel time the first held packet arrived; `None` when not holding.
    since: Option<u64>,
    pkts: Vec<(usize, Vec<u8>, u64)>,
    bytes: usize,
    stats: LimboStats,
}

/// What the restart holding did (in the per-second log as `restart`).
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
struct LimboStats {
    /// Times a new sender instance was seen and holding began.
    episodes: u64,
    /// Packets held.
    held: u64,
    /// Held packets fed to a new session's video path.
    replayed: u64,
    /// Held packets fed back to the current path because no new announcement came in time.
    flushed: u64,
    /// Packets refused because the hold was full, or discarded (new session without video).
    dropped: u64,
}

/// Most packets held for a new sender instance (a 2.5-Mbit/s session of 1200-B packets sends
/// about 260 a second; the announcement normally follows within a second).
const LIMBO_MAX_PACKETS: usize = 4096;
/// Most bytes held.
const LIMBO_MAX_BYTES: usize = 4 << 20;
/// Longest hold: without a new announcement by then the SSRC change was not a new session
/// (or a forged packet), and the held packets go to the current path as before.
const LIMBO_MAX_NS: u64 = 3_000_000_000;

impl Limbo {
    fn active(&self) -> bool {
        self.since.is_some()
    }
    /// Starts holding (a layer saw a new SSRC at kernel time `ts`); no-op when already holding.
    fn begin(&mut self, ts: u64) {
        if self.since.is_none() {
            self.since = Some(ts);
            self.stats.episodes += 1;
        }
    }
    fn push(&mut self, layer: usize, data: &[u8], ts: u64) {
        if self.pkts.len() >= LIMBO_MAX_PACKETS || self.bytes + data.len() > LIMBO_MAX_BYTES {
            self.stats.dropped += 1;
            return;
        }
        self.bytes += data.len();
        self.stats.held += 1;
        self.pkts.push((layer, data.to_vec(), ts));
    }
    /// Whether the hold has outlived [`LIMBO_MAX_NS`] at kernel time `now`.
    fn expired(&self, now: u64) -> bool {
        self.since
            .is_some_and(|s| now.saturating_sub(s) >= LIMBO_MAX_NS)
    }
    /// Ends holding; the held packets in arrival order.
    fn take(&mut self) -> Vec<(usize, Vec<u8>, u64)> {
        self.since = None;
        self.bytes = 0;
        std::mem::take(&mut self.pkts)
    }
    /// Ends holding and feeds what was held to `v` (counted as `replayed` for a new
    /// session's path, `flushed` for the current one), or drops it when there is no path.
    fn release(&mut self, v: Option<&mut crate::video::Video>, new_session: bool) {
        let pkts = self.take();
        let n = pkts.len() as u64;
        match v {
            Some(v) => {
                for (k, d, ts) in pkts {
                    v.push(k, &d, ts);
                }
                if new_session {
                    self.stats.replayed += n;
                } else {
                    self.stats.flushed += n;
                }
            }
            None => self.stats.dropped += n,
        }
    }
}

/// Counters and per-second tallies the feed path updates.
#[derive(Default)]
struct Tally {
    total: Counters,
    sec: Counters,
    gaps_ns: Vec<u64>,
    last_pkt_ts: Option<u64>,
    max_gap_sec: u64,
    first_packet_ts: Option<u64>,
    last_now: u64,
    /// Windowed minimum of `offset_us` (current and previous 5-s window), so that a sender
    /// clock step or a new sender heals within 10 s.
    off_cur: Option<i64>,
    off_prev: Option<i64>,
    off_window_start: u64,
    /// Receive time of the first of an unbroken run of stale packets, and the least delay in
    /// that run (see `is_stale`).
    stale_since: Option<u64>,
    stale_min: i64,
    /// Times a run of stale packets lasted `RESTALE_NS` and the floor was rebuilt from it.
    stale_resets: u64,
    /// SSRCs that replaced another on a layer since the current session was accepted: a new
    /// sender instance whose announcement has not been accepted yet (bounded).
    new_ssrcs: Vec<u32>,
    /// TFMCC: where `feed` puts each packet's extension block for the controller.
    tfmcc_ext: Option<crate::tfmcc::ExtSlot>,
}

impl Tally {
    fn min_offset(&self) -> Option<i64> {
        match (self.off_cur, self.off_prev) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    fn note_offset(&mut self, ts: u64, off: i64) {
        if ts.saturating_sub(self.off_window_start) > 5_000_000_000 {
            self.off_prev = self.off_cur.take();
            self.off_window_start = ts;
        }
        self.off_cur = Some(self.off_cur.map_or(off, |m| m.min(off)));
    }
    fn reset_offsets(&mut self) {
        self.off_cur = None;
        self.off_prev = None;
    }
    /// Whether a packet received at `ts` (ns) with delay offset `off` (µs) is stale: more
    /// than `STALE_US` above the windowed minimum.
    ///
    /// Only packets that are fed update the minimum, so if the path's delay rises by more than
    /// `STALE_US` for good (a deep queue that stays, a route change) every later packet would
    /// read as stale and the session would be locked out. A router's unresolved-route queue,
    /// which the filter is for, is flushed in one burst; so when every packet for
    /// `RESTALE_NS` of arrival time has been stale, the delay has really risen: the floor is
    /// rebuilt from the least delayed packet of that run (counted in `stale_resets`).
    fn is_stale(&mut self, ts: u64, off: i64) -> bool {
        let Some(m) = self.min_offset() else {
            return false;
        };
        if off <= m + STALE_US {
            self.stale_since = None;
            return false;
        }
        match self.stale_since {
            None => {
                self.stale_since = Some(ts);
                self.stale_min = off;
            }
            Some(_) => self.stale_min = self.stale_min.min(off),
        }
        let since = self.stale_since.unwrap_or(ts);
        if ts.saturating_sub(since) < RESTALE_NS {
            return true;
        }
        let floor = self.stale_min;
        self.reset_offsets();
        self.off_window_start = ts;
        self.off_cur = Some(floor);
        self.stale_since = None;
        self.stale_resets += 1;
        off > floor + STALE_US
    }
}

/// Hands one packet to the controller and updates the host's own counters.
fn feed(
    l: &mut Layer,
    ctl: Option<&mut Box<dyn LayeredController>>,
    video: Option<&mut crate::video::Video>,
    limbo: &mut Limbo,
    t: &mut Tally,
    mut p: Pkt,
) {
    let ts = p.ts;
    if l.ssrc != Some(p.ssrc) {
        if l.ssrc.is_some() {
            // A layer already received changed SSRC: a new sender instance whose
            // announcement is not accepted yet. Hold its video until it is (`Limbo`).
            if video.is_some() {
                limbo.begin(ts);
            }
            if t.new_ssrcs.len() < 64 && !t.new_ssrcs.contains(&p.ssrc) {
                t.new_ssrcs.push(p.ssrc);
            }
            l.prev_ssrc = l.ssrc;
        }
        // New sender instance (restart): new sequence space, not a loss burst.
        l.ext.reset();
        l.highest = None;
        l.bunch_start = None;
        l.ssrc = Some(p.ssrc);
    }
    let e = l.ext.extend(p.seq);
    if let Some(h) = l.highest {
        if e > h + 1 {
            t.total.lost += e - h - 1;
            t.sec.lost += e - h - 1;
        }
    }
    if l.highest.is_none_or(|h| e > h) {
        l.highest = Some(e);
    }
    // Packet-bunch dispersion (diagnostics; the controller keeps its own).
    let cc = p.cc;
    if cc.bunch_pos == 0 {
        l.bunch_start = Some((e, ts));
    } else if let Some((s0, t0)) = l.bunch_start {
        if cc.bunch_pos + 1 == cc.bunch_len && e == s0 + cc.bunch_pos as u64 && ts > t0 {
            t.gaps_ns.push((ts - t0) / cc.bunch_pos as u64);
            l.bunch_start = None;
        }
    }
    if let Some(prev) = t.last_pkt_ts {
        t.max_gap_sec = t.max_gap_sec.max(ts.saturating_sub(prev));
    }
    t.last_pkt_ts = Some(t.last_pkt_ts.map_or(ts, |x| x.max(ts)));
    t.first_packet_ts.get_or_insert(ts);
    t.note_offset(ts, p.offset_us());
    t.total.packets += 1;
    t.total.bytes += p.size as u64;
    t.sec.packets += 1;
    t.sec.bytes += p.size as u64;
    // Held packets are fed late: keep `now` monotonic for the controller, while the arrival
    // itself carries its true kernel timestamp.
    t.last_now = t.last_now.max(ts);
    if let Some(c) = ctl {
        let arr = PacketArrival {
            layer: cc.layer,
            seq: e,
            bunch_pos: cc.bunch_pos,
            bunch_len: cc.bunch_len,
            size: p.size as u32,
            send_time_us: cc.send_time_us,
            recv_time: Time(ts),
        };
        if let Some(slot) = &t.tfmcc_ext {
            if let Ok(mut b) = slot.lock() {
                *b = std::mem::take(&mut p.ext);
            }
        }
        c.handle_packet(Time(t.last_now), &arr);
    }
    if let Some(v) = video {
        if limbo.active() {
            limbo.push(p.layer, &p.data, ts);
        } else {
            v.push(p.layer, &p.data, ts);
        }
    }
}

/// Inputs dropped, by reason (exported as `layercast_player_dropped_total{reason}`).
#[derive(Default, Clone, Debug)]
pub struct Drops {
    pub malformed_rtp: u64,
    pub missing_cc: u64,
    pub bad_cc: u64,
    pub wrong_layer: u64,
    pub truncated: u64,
    pub malformed_sam: u64,
    pub malformed_announcement: u64,
    pub stale: u64,
    /// Data packets that failed authentication (encrypted sessions): wrong key, forged,
    /// altered, or not sealed at all.
    pub media_auth_failed: u64,
    /// SAMs from the group ignored because the session description had not arrived yet.
    pub sam_before_description: u64,
    /// Packets of the previous session (its SSRCs) that arrived after a new session was
    /// accepted: fed to the new session's video path they would set its assembler's start
    /// to a foreign picture ID.
    pub old_session: u64,
}

/// The SAM verifier's counters as the player reports them.
fn sam_json(v: Option<&security::auth::SamVerifier>, gate: &crate::auth::SamGate) -> Value {
    match v {
        None => Value::Null,
        Some(v) => {
            let s = v.stats();
            // `not_newer`: refused before verification as replays or stale sequence numbers;
            // `over_budget`: refused by the verification budget (F10).
            json!({"accepted": s.accepted, "malformed": s.malformed, "unsigned": s.unsigned,
                   "bad_signature": s.bad_signature, "stale": s.stale, "replayed": s.replayed,
                   "not_newer": gate.skipped_old, "over_budget": gate.over_budget})
        }
    }
}

/// Host-side counters (independent of the controller's own).
#[derive(Default, Clone, Debug)]
struct Counters {
    packets: u64,
    bytes: u64,
    lost: u64,
}

// One event per announcement poll (about once a second), moved through a channel; the
// security parameters are boxed so the common announcement events stay small.
enum Event {
    Announcement(SessionInfo),
    BadAnnouncement(String),
    /// The session description's security parameters; always before the first announcement.
    Security(Box<crate::auth::SessionSecurity>),
}

/// Polls the announcement URL once per interval and forwards what it gets. First it fetches
/// the session description (SAM key, media key, SSM source), retrying each interval: nothing
/// is joined before the player knows how to authenticate what it will receive.
///
/// `refresh` asks for the description again: the receive loop sets it when SAMs stop
/// verifying or packets stop opening, which is what a restarted server (new signing key, new
/// media key) looks like. It is served at once, but at most once per [`REFRESH_SPACING`], so
/// forged SAMs can cost the server one HTTPS request per player per second and no more.
/// The shortest time between two fetches of the session description asked for by `refresh`.
const REFRESH_SPACING: Duration = Duration::from_secs(1);

fn url_poller(
    url: String,
    every: Duration,
    tx: Sender<Event>,
    stop: Arc<AtomicBool>,
    refresh: Arc<AtomicBool>,
    rid: Option<u32>,
    binding: String,
) {
    let description = crate::auth::description_url(&url);
    let mut need_security = description.clone();
    let mut complained = false;
    let mut last_fetch = Instant::now();
    let refresh_due =
        |last: Instant| refresh.load(Ordering::Relaxed) && last.elapsed() >= REFRESH_SPACING;
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        if need_security.is_none() && refresh_due(last_fetch) {
            refresh.store(false, Ordering::Relaxed);
            need_security = description.clone();
        }
        if need_security.is_some() {
            last_fetch = Instant::now();
        }
        if let Some(d) = &need_security {
            match crate::auth::fetch_security(d, Duration::from_millis(1500), rid, &binding) {
                Ok(sec) => {
                    let _ = tx.send(Event::Security(Box::new(sec)));
                    need_security = None;
                }
                Err(e) => {
                    if !complained {
                        eprintln!("layercast-player: session description: {e} (retrying)");
                        complained = true;
                    }
                    while t0.elapsed() < every && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    continue;
                }
            }
        }
        // A server that is away (error, non-200) leaves the last announcement in force.
        if let Ok((200, body)) = http_client::request("GET", &url, None, Duration::from_millis(700))
        {
            let ev = match serde_json::from_slice::<SessionInfo>(&body) {
                Ok(info) => match congestion::wire::sam::validate(&info) {
                    Ok(()) => Event::Announcement(info),
                    Err(e) => Event::BadAnnouncement(e.to_string()),
                },
                Err(e) => Event::BadAnnouncement(e.to_string()),
            };
            let _ = tx.send(ev);
        }
        // A due refresh request ends the wait: a restarted server's new key is wanted now, not
        // at the next poll.
        while t0.elapsed() < every && !stop.load(Ordering::Relaxed) {
            if need_security.is_none() && refresh_due(last_fetch) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Sends telemetry bodies it receives, dropping any backlog (only the newest matters): over
/// the UDP report channel when it has a key and a report is due (a body that is not due is
/// held, its decisions kept for the next), else over HTTP.
fn telemetry_poster(
    url: String,
    rx: Receiver<Value>,
    udp: Arc<Mutex<Option<crate::report::ReportSender>>>,
) {
    let mut held: Option<Value> = None;
    while let Ok(mut v) = rx.recv() {
        if let Some(h) = held.take() {
            v = merge_reports(h, v);
        }
        while let Ok(newer) = rx.try_recv() {
            v = merge_reports(v, newer);
        }
        if let Some(r) = udp.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            r.poll_acks();
            let now = Instant::now();
            if !r.due(now) {
                held = Some(v);
                continue;
            }
            if r.send(v.to_string().as_bytes(), now).is_ok() {
                continue;
            }
        }
        let _ = http_client::request(
            "POST",
            &url,
            Some(v.to_string().as_bytes()),
            Duration::from_millis(500),
        );
    }
}

/// The newer report with the decisions of both (bounded: a server away for long would
/// otherwise grow this without limit while posts time out).
fn merge_reports(mut older: Value, mut newer: Value) -> Value {
    let mut d = match older["decisions"].take() {
        Value::Array(a) => a,
        _ => Vec::new(),
    };
    if let Value::Array(n) = newer["decisions"].take() {
        d.extend(n);
    }
    if d.len() > MAX_DECISIONS_PER_REPORT {
        d.drain(..d.len() - MAX_DECISIONS_PER_REPORT);
    }
    newer["decisions"] = Value::Array(d);
    newer
}

/// `which` entries at and above this name the audio sockets (`crate::audio_net`).
const AUDIO_FD_BASE: usize = 1 << 20;

/// A joining player that has decoded nothing asks for a key picture again after this long
/// (a lost request, or a server that was rate-limiting requests).
const KEY_REQUEST_RETRY: Duration = Duration::from_millis(1500);

/// Per-second ticks between two [`trim_heap`] calls.
const TRIM_EVERY_TICKS: u64 = 10;

/// Gives the allocator's free pages back to the kernel (glibc: `malloc_trim(0)`, which also
/// releases whole free pages inside the heap, not only at its top).
///
/// Why: the player's live heap is small and bounded (about 230 KB at 10 Mbit/s, heaptrack),
/// but its per-second churn (packet-pair lists, decisions, JSON reports built on one thread
/// and freed on the telemetry thread) leaves free holes between long-lived blocks that glibc
/// keeps resident; over a 30-minute soak that showed as a steady RssAnon climb of 1.5–2.5
/// KiB/min with no leak behind it. A trim every 10 s costs microseconds on a heap this size.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; no pointer is passed.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Decisions kept for one per-second report (log line and telemetry post); more in one second
/// are dropped. Also the cap on decisions the telemetry poster merges from skipped reports.
const MAX_DECISIONS_PER_REPORT: usize = 64;

/// A decision as JSON. Repeated input names (ERA lists every packet-pair sample of an RAI as
/// `pp_sample`, hundreds per second at high rates) keep their last value, as a JSON object
/// must; the map is built by insertion so a repeated name costs no allocation. Collecting
/// all pairs into a map first (as this did) made one large temporary vector and a `String`
/// per sample every RAI, freed a moment later around the long-lived report values: the
/// allocator churn behind the player's slow RssAnon climb (docs/reliability.md, "Soak").
fn decision_json(d: &Decision) -> Value {
    let mut inputs = serde_json::Map::new();
    for (k, v) in d.inputs.iter().filter(|(_, v)| v.is_finite()) {
        match inputs.get_mut(*k) {
            Some(slot) => *slot = json!(v),
            None => {
                inputs.insert((*k).to_string(), json!(v));
            }
        }
    }
    json!({"at_s": d.at.as_secs_f64(), "from": d.from_layers, "to": d.to_layers,
           "reason": d.reason, "inputs": inputs})
}

/// The SSRCs of the session being replaced: what the layers received, or received before a
/// new sender took over (`prev_ssrc`), except the new sender's own (`new_ssrcs`).
fn previous_session_ssrcs(layers: &[Layer], new_ssrcs: &[u32]) -> Vec<u32> {
    let mut v: Vec<u32> = layers
        .iter()
        .flat_map(|l| [l.ssrc, l.prev_ssrc])
        .flatten()
        .filter(|x| !new_ssrcs.contains(x))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn same_layout(a: &SessionInfo, b: &SessionInfo) -> bool {
    a.layers == b.layers && a.packet_size == b.packet_size && a.bunch_len == b.bunch_len
}

/// Parses one datagram into what the controller needs, or the reason to drop it.
fn parse_packet(buf: &[u8], ts: u64, drops: &mut Drops) -> Option<(CcFields, u16, u32)> {
    let Ok(p) = RtpPacket::parse(buf) else {
        drops.malformed_rtp += 1;
        return None;
    };
    let Some(data) = p.extension(cc_ext::DEFAULT_ID) else {
        drops.missing_cc += 1;
        return None;
    };
    let _ = ts;
    match CcFields::parse(data) {
        Ok(cc) => Some((cc, p.sequence_number(), p.ssrc())),
        Err(_) => {
            drops.bad_cc += 1;
            None
        }
    }
}

/// The controller called `name`: the product's, plus the papers' baselines in a build with the
/// `research` feature (the testbed's).
fn live_controller(name: &str) -> Result<Box<dyn LayeredController>> {
    #[cfg(feature = "research")]
    let c = baselines::live_controller_by_name(name)?;
    #[cfg(not(feature = "research"))]
    let c = congestion::live_controller_by_name(name)?;
    Ok(c)
}

pub fn run(a: Args, signalled: &AtomicBool) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ev_tx, ev_rx) = mpsc::channel::<Event>();
    // A description handed over at start is the first announcement: the base layer is joined
    // in the first turn of the loop, not one announcement interval later (plm/E3).
    if let Some(i) = a.session_info.clone() {
        let _ = ev_tx.send(Event::Announcement(i));
    }
    let mut threads = Vec::new();
    let refresh_security = Arc::new(AtomicBool::new(false));
    // A TFMCC player's receiver id, known before the description is fetched: an
    // `auth_reports` session hands out the report key of exactly this id.
    let tfmcc_rid = (a.fixed_layers.is_none() && a.controller.eq_ignore_ascii_case("tfmcc"))
        .then(|| crate::tfmcc::random_rid(&a.viewer_id));
    if let Some(url) = a.session_url.clone() {
        let (tx, st, rf) = (ev_tx.clone(), stop.clone(), refresh_security.clone());
        let every = Duration::from_millis(a.poll_interval_ms.max(50));
        let binding = crate::auth::new_binding()?;
        // Every player has a receiver id: its UDP report key is issued for it.
        let rid = tfmcc_rid.unwrap_or_else(|| crate::tfmcc::random_rid(&a.viewer_id));
        threads.push(std::thread::spawn(move || {
            url_poller(url, every, tx, st, rf, Some(rid), binding)
        }));
    }
    // Authentication failures seen when the description was last asked for again.
    let mut auth_failures_seen = 0u64;
    let mut sam_gate = crate::auth::SamGate::new(50.0, Instant::now());
    // Security state: the pinned SAM key, the media opener, the SSM source (from the flags,
    // then from the session description).
    let mut sam: Option<security::auth::SamVerifier> = match &a.sam_key {
        Some(k) => Some(security::auth::SamVerifier::from_published(k)?),
        None => None,
    };
    let mut opener: Option<security::auth::MediaOpener> = None;
    let mut ssm: Option<std::net::Ipv4Addr> = a.ssm;
    // With a session URL, multicast SAMs wait for the description (which may pin a key, name
    // an SSM source or carry the media key): an unverified SAM taken before it arrives would
    // join layers any-source and unauthenticated.
    let mut security_ready = a
        .session_url
        .as_deref()
        .and_then(crate::auth::description_url)
        .is_none();
    let (mut open_ns, mut opened) = (0u64, 0u64);
    let mut plain = vec![0u8; 2048];
    let ann_sock = match a.announce {
        Some(sa) => Some(McastSocket::open(*sa.ip(), sa.port(), a.interface, true)?),
        None => None,
    };
    let report_slot: Arc<Mutex<Option<crate::report::ReportSender>>> = Arc::default();
    let tele_tx = a.telemetry_url.clone().map(|url| {
        let (tx, rx) = mpsc::channel::<Value>();
        let slot = report_slot.clone();
        std::thread::spawn(move || telemetry_poster(url, rx, slot));
        tx
    });
    let metrics_text = Arc::new(Mutex::new(String::new()));
    if let Some(addr) = a.metrics_addr {
        let srv = tiny_http::Server::http(addr).map_err(|e| {
            Error::io(
                format!("metrics on {addr}"),
                std::io::Error::other(e.to_string()),
            )
        })?;
        let (mt, st) = (metrics_text.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                if let Ok(Some(req)) = srv.recv_timeout(Duration::from_millis(200)) {
                    let body = mt.lock().map(|s| s.clone()).unwrap_or_default();
                    let _ = req.respond(tiny_http::Response::from_string(body));
                }
            }
        }));
    }
    let mut log = match &a.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {dir:?}"), e))?;
            let p = dir.join("player.jsonl");
            Some(std::fs::File::create(&p).map_err(|e| Error::io(format!("creating {p:?}"), e))?)
        }
        None => None,
    };
    let mut tally = Tally::default();
    let mut tfmcc: Option<(crate::tfmcc::Feedback, Arc<Mutex<crate::tfmcc::View>>)> = None;
    let mut ctl: Option<Box<dyn LayeredController>> = match a.fixed_layers {
        Some(_) => None,
        None if a.controller.eq_ignore_ascii_case("tfmcc") => {
            let rid = tfmcc_rid.unwrap_or_else(|| crate::tfmcc::random_rid(&a.viewer_id));
            let (c, slot, view) = crate::tfmcc::TfmccCtl::new(rid);
            tally.tfmcc_ext = Some(slot);
            let host = a
                .session_url
                .as_deref()
                .and_then(|u| http_client::split_url(u).ok())
                .and_then(|(h, _)| h.parse::<std::net::SocketAddrV4>().ok())
                .map(|sa| *sa.ip());
            let fb = crate::tfmcc::Feedback::new(a.interface, host, a.tfmcc_feedback)?;
            tfmcc = Some((fb, view));
            Some(Box::new(c))
        }
        None => Some(live_controller(&a.controller)?),
    };
    let protocol = match a.fixed_layers {
        Some(n) => format!("fixed:{n}"),
        None => a.controller.clone(),
    };

    let mut info: Option<SessionInfo> = None;
    let mut layers: Vec<Layer> = Vec::new();
    let mut drops = Drops::default();
    let mut video: Option<crate::video::Video> = None;
    // Issue 21: the audio track (crate::audio) and its sockets, held with layer 0.
    let mut audio: Option<crate::audio::Audio> = None;
    let mut audio_net = crate::audio_net::AudioNet::default();
    let mut limbo = Limbo::default();
    // SSRCs of the session before the current one (see `Drops::old_session`).
    let mut retired: Vec<u32> = Vec::new();
    let mut first_join_ns: Option<u64> = None;
    // `POST .../api/sessions/ID/keyframe` (docs/player.md "Join-time key picture").
    let key_url = a
        .session_url
        .as_deref()
        .and_then(crate::auth::description_url)
        .map(|d| format!("{d}/keyframe"));
    let mut last_key_request: Option<Instant> = None;
    let mut pending_decisions: Vec<Value> = Vec::new();
    let mut fixed_held: u8 = 0;
    let mut buf = vec![0u8; 2048];
    let start_wall = Instant::now();
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    let mut last_tick = Instant::now();
    let mut exit_requested = false;
    let mut ticks: u64 = 0;

    loop {
        if signalled.load(Ordering::SeqCst) || exit_requested {
            break;
        }
        if let Some(d) = a.duration {
            if start_wall.elapsed().as_secs_f64() >= d {
                break;
            }
        }
        // 1. Announcements (HTTP poller or the announcement group).
        let mut anns: Vec<SessionInfo> = Vec::new();
        while let Ok(ev) = ev_rx.try_recv() {
            match ev {
                Event::Announcement(i) => anns.push(i),
                Event::BadAnnouncement(e) => {
                    drops.malformed_announcement += 1;
                    if drops.malformed_announcement <= 3 {
                        eprintln!("layercast-player: dropped announcement: {e}");
                    }
                }
                Event::Security(sec) => {
                    let sec = *sec;
                    security_ready = true;
                    // A key from the description replaces the one in use when it differs (the
                    // server restarted with a new key); a key pinned by --sam-key never changes,
                    // and the same key keeps its verifier (and so its replay window).
                    if a.sam_key.is_none() {
                        if let Some(new) = sec.sam {
                            if sam.as_ref().map(|v| v.key_id()) != Some(new.key_id()) {
                                sam = Some(new);
                            }
                        }
                    }
                    if ssm.is_none() && !a.ssm_any {
                        ssm = sec.ssm;
                    }
                    opener = sec.opener;
                    if let Some((fb, _)) = tfmcc.as_mut() {
                        fb.key = sec.report_key;
                    }
                    *report_slot.lock().unwrap_or_else(|p| p.into_inner()) =
                        crate::report::sender_for(&a, sec.telemetry);
                    eprintln!(
                        "layercast-player: SAM key {}, media {}, {}",
                        if sam.is_some() { "pinned" } else { "none" },
                        if opener.is_some() {
                            "encrypted"
                        } else {
                            "in the clear"
                        },
                        ssm.map_or("any-source joins".to_string(), |s| format!("SSM from {s}"))
                    );
                }
            }
        }
        // SAMs that stop verifying or packets that stop opening: ask for the description again.
        // Forged SAMs alone do not cause a refresh while genuine ones still verify (F10).
        let sam_failing = sam_gate.quiet_for(Duration::from_secs(3), Instant::now());
        let auth_failures = sam
            .as_ref()
            .filter(|_| sam_failing)
            .map_or(0, |v| v.stats().bad_signature)
            + drops.media_auth_failed;
        if auth_failures > auth_failures_seen {
            auth_failures_seen = auth_failures;
            refresh_security.store(true, Ordering::Relaxed);
        }
        // 2. Wait for packets or the controller's next deadline.
        let mut fds: Vec<i32> = Vec::new();
        let mut which: Vec<Option<usize>> = Vec::new();
        if let Some(s) = &ann_sock {
            fds.push(s.raw_fd());
            which.push(None);
        }
        for (k, l) in layers.iter().enumerate() {
            if let Some(s) = &l.sock {
                fds.push(s.raw_fd());
                which.push(Some(k));
            }
        }
        for (j, fd) in audio_net.fds().into_iter().enumerate() {
            fds.push(fd);
            which.push(Some(AUDIO_FD_BASE + j));
        }
        let now_ns = net::realtime_ns();
        let mut wait_ms: i64 = 50;
        if let Some(c) = &ctl {
            if let Some((t, _)) = c.poll_timeout() {
                let ms = (t.as_nanos() as i64 - now_ns as i64) / 1_000_000;
                wait_ms = wait_ms.min(ms.max(0));
            }
        }
        if let Some(d) = audio.as_ref().and_then(|x| x.next_due()) {
            let ms = (d as i64 - now_ns as i64) / 1_000_000;
            wait_ms = wait_ms.min(ms.max(0));
        }
        if let Some(d) = video.as_ref().and_then(|v| v.next_due()) {
            let ms = (d as i64 - now_ns as i64) / 1_000_000;
            wait_ms = wait_ms.min(ms.max(0));
        }
        if !anns.is_empty() {
            wait_ms = 0;
        }
        let ready = net::poll_readable(&fds, wait_ms as i32);
        // 3. Drain readable sockets into one batch sorted by kernel time.
        let mut batch: Vec<Pkt> = Vec::new();
        for i in ready {
            match which[i] {
                None => {
                    let Some(s) = &ann_sock else { continue };
                    for _ in 0..crate::auth::SAMS_PER_TURN {
                        let Ok(Some((n, _ts, trunc))) = s.recv(&mut buf) else {
                            break;
                        };
                        if trunc {
                            drops.malformed_sam += 1;
                            continue;
                        }
                        if !security_ready {
                            drops.sam_before_description += 1;
                            continue;
                        }
                        // With a pinned key only verified SAMs count (the verifier counts the
                        // rest by reason); without one, any well-formed SAM (legacy mode).
                        match sam.as_mut() {
                            Some(_) if !sam_gate.admit(&buf[..n], Instant::now()) => {}
                            Some(v) => match v.verify(&buf[..n], net::realtime_ns() / 1_000_000) {
                                Ok(ok) => {
                                    sam_gate.verified(&ok.info, Instant::now());
                                    anns.push(ok.info)
                                }
                                // Not a SAM at all: also the legacy counter, which means
                                // "did not decode" in both modes.
                                Err(
                                    congestion::Error::Truncated { .. }
                                    | congestion::Error::Malformed { .. }
                                    | congestion::Error::Invalid { .. },
                                ) => drops.malformed_sam += 1,
                                Err(_) => {}
                            },
                            None => match congestion::wire::sam::decode(&buf[..n]) {
                                Ok(d) => anns.push(d.info),
                                Err(_) => drops.malformed_sam += 1,
                            },
                        }
                    }
                }
                Some(k) if k >= AUDIO_FD_BASE => {
                    let mut sr = video.as_ref().and_then(|v| v.sender_report);
                    let vssrc = info
                        .as_ref()
                        .and_then(|i| i.track(proto::TrackKind::Video))
                        .and_then(|t| t.streams.first())
                        .map(|s| s.ssrc);
                    audio_net.drain(
                        k - AUDIO_FD_BASE,
                        &mut buf,
                        opener.as_mut(),
                        audio.as_mut(),
                        &mut sr,
                        vssrc,
                    );
                    if let Some(v) = video.as_mut() {
                        v.sender_report = sr;
                    }
                }
                Some(k) => {
                    let Some(s) = &layers[k].sock else { continue };
                    for _ in 0..256 {
                        let Ok(Some((n, ts, trunc))) = s.recv(&mut buf) else {
                            break;
                        };
                        if trunc {
                            drops.truncated += 1;
                            continue;
                        }
                        // Encrypted session: authenticate and decrypt first; the wire size
                        // `n` still counts for rates, the kernel time for timing.
                        let data: &[u8] = match opener.as_mut() {
                            Some(o) => {
                                let t0 = Instant::now();
                                let r = o.open(&buf[..n]);
                                open_ns += t0.elapsed().as_nanos() as u64;
                                opened += 1;
                                match r {
                                    Ok(p) => {
                                        plain.clear();
                                        plain.extend_from_slice(&p.packet);
                                        &plain
                                    }
                                    Err(_) => {
                                        drops.media_auth_failed += 1;
                                        continue;
                                    }
                                }
                            }
                            None => &buf[..n],
                        };
                        if let Some((cc, seq, ssrc)) = parse_packet(data, ts, &mut drops) {
                            if cc.layer as usize != k {
                                drops.wrong_layer += 1;
                                continue;
                            }
                            batch.push(Pkt {
                                ts,
                                layer: k,
                                cc,
                                seq,
                                ssrc,
                                size: n,
                                data: if video.is_some() {
                                    data.to_vec()
                                } else {
                                    Vec::new()
                                },
                                ext: if tfmcc.is_some() {
                                    crate::tfmcc::extension_block(&buf[..n])
                                        .map(<[u8]>::to_vec)
                                        .unwrap_or_default()
                                } else {
                                    Vec::new()
                                },
                            });
                        }
                    }
                }
            }
        }
        // 4. Apply announcements (after draining, so a restart's new session is seen first).
        for new in anns {
            let now = Time(net::realtime_ns());
            let changed = match &info {
                None => true,
                Some(old) => old.session_id != new.session_id || !same_layout(old, &new),
            };
            if changed {
                // The previous session's SSRCs: what the layers received, or received before
                // a new sender took over, except that new sender's own.
                let old_ssrcs = previous_session_ssrcs(&layers, &tally.new_ssrcs);
                tally.new_ssrcs.clear();
                let relayout = info.as_ref().is_none_or(|o| !same_layout(o, &new));
                if relayout {
                    // Close sockets of layers whose address changed; re-open held ones below.
                    let held: Vec<usize> = layers
                        .iter()
                        .enumerate()
                        .filter(|(_, l)| l.sock.is_some())
                        .map(|(k, _)| k)
                        .collect();
                    let mut fresh: Vec<Layer> =
                        (0..new.layers.len()).map(|_| Layer::default()).collect();
                    for k in held {
                        if k < new.layers.len() {
                            let li = &new.layers[k];
                            fresh[k].sock =
                                McastSocket::open_from(li.group, li.port, a.interface, ssm).ok();
                            fresh[k].quarantine = true;
                        }
                    }
                    layers = fresh;
                } else {
                    for l in layers.iter_mut() {
                        l.ext.reset();
                        l.highest = None;
                        l.ssrc = None;
                        l.prev_ssrc = None;
                        l.bunch_start = None;
                    }
                }
                tally.reset_offsets();
                video = crate::video::Video::new(&new, &a, video.take());
                audio_net.reset();
                audio = new.track(proto::TrackKind::Audio).and_then(|t| {
                    let o = crate::audio::AudioOptions {
                        out: a.out.as_deref(),
                        speaker: a.window,
                        delay_ns: a.playout_delay_ms * 1_000_000,
                    };
                    crate::audio::Audio::new(t, &o, audio.take())
                });
                // Subscribe the new path to the layers held now: it starts with none, and
                // would ignore this turn's packets (and the held ones) until step 7.
                if let Some(v) = video.as_mut() {
                    v.set_layers(layers.iter().filter(|l| l.sock.is_some()).count());
                }
                // The new sender's packets that came before its announcement: the new path
                // gets them first (they hold its first key picture).
                let new_session = info
                    .as_ref()
                    .is_some_and(|o| o.session_id != new.session_id);
                if new_session {
                    retired = old_ssrcs;
                    // A new session instance (a restarted server) has new keys: its media
                    // key and its report secret are made per session start, and a server
                    // with a persistent SAM key (`sam_key_file`) gives no other sign of it
                    // (its SAMs keep verifying). Ask for the description again, so the
                    // report key (TFMCC `auth_reports`) and the media key follow.
                    refresh_security.store(true, Ordering::Relaxed);
                }
                if limbo.active() {
                    limbo.release(video.as_mut(), new_session);
                }
                eprintln!(
                    "layercast-player: session {} ({} layers, {} B packets, bunch {})",
                    new.session_id,
                    new.layers.len(),
                    new.packet_size,
                    new.bunch_len
                );
            }
            if let Some(c) = ctl.as_mut() {
                c.handle_announcement(now, &new);
            } else if let Some(n) = a.fixed_layers {
                fixed_held = n.min(new.layers.len() as u8);
            }
            info = Some(new);
        }
        batch.sort_by_key(|b| b.ts);
        // 5. Feed packets: stale ones (held in a router queue, see `STALE`) are dropped, a
        //    newly joined layer's first packets are held for `QUARANTINE` and filtered.
        let now_ns = net::realtime_ns();
        for p in batch {
            if retired.contains(&p.ssrc) {
                drops.old_session += 1;
                continue;
            }
            if tally.is_stale(p.ts, p.offset_us()) {
                drops.stale += 1;
                continue;
            }
            // A packet drained before an announcement that shrank the layout (a new session
            // with fewer layers) names a layer that no longer exists: a counted drop.
            let Some(l) = layers.get_mut(p.layer) else {
                drops.wrong_layer += 1;
                continue;
            };
            if l.quarantine {
                l.first_held.get_or_insert(p.ts);
                l.held.push(p);
                continue;
            }
            feed(l, ctl.as_mut(), video.as_mut(), &mut limbo, &mut tally, p);
        }
        for l in layers.iter_mut() {
            let Some(first) = l.first_held else { continue };
            if !l.quarantine || now_ns.saturating_sub(first) < QUARANTINE_NS {
                continue;
            }
            let mut held = std::mem::take(&mut l.held);
            let before = held.len();
            held.retain(|p| !retired.contains(&p.ssrc));
            drops.old_session += (before - held.len()) as u64;
            let m = held.iter().map(|p| p.offset_us()).min().unwrap_or(0);
            let m = tally.min_offset().map_or(m, |g| g.min(m));
            for p in held {
                if p.offset_us() > m + HELD_SLACK_US {
                    drops.stale += 1;
                } else {
                    feed(l, ctl.as_mut(), video.as_mut(), &mut limbo, &mut tally, p);
                }
            }
            l.quarantine = false;
            l.first_held = None;
        }
        // No new announcement in time: the SSRC change was not a new session.
        if limbo.expired(now_ns) {
            limbo.release(video.as_mut(), false);
        }
        // 6. Timeouts.
        if let Some(c) = ctl.as_mut() {
            let now = Time(net::realtime_ns());
            if let Some((t, _)) = c.poll_timeout() {
                if now >= t {
                    c.handle_timeout(now);
                }
            }
        }
        // 7. Actions and decisions.
        let mut actions: Vec<Action> = Vec::new();
        if let Some(c) = ctl.as_mut() {
            while let Some(act) = c.poll_action() {
                actions.push(act);
            }
            while let Some(d) = c.poll_decision() {
                // Bounded: a second's decisions (the controller decides a few times per
                // second at most; the cap only guards a misbehaving one).
                if pending_decisions.len() < MAX_DECISIONS_PER_REPORT {
                    pending_decisions.push(decision_json(&d));
                }
            }
        } else if info.is_some() {
            let held = layers.iter().filter(|l| l.sock.is_some()).count() as u8;
            for k in held..fixed_held {
                actions.push(Action::Join(k));
            }
        }
        for act in actions {
            match act {
                Action::Join(k) => {
                    let Some(i) = &info else { continue };
                    let Some(li) = i.layers.get(k as usize) else {
                        continue;
                    };
                    let l = &mut layers[k as usize];
                    if l.sock.is_none() {
                        l.ext.reset();
                        l.highest = None;
                        l.bunch_start = None;
                        l.ssrc = None;
                        l.quarantine = true;
                        l.held.clear();
                        l.first_held = None;
                        match McastSocket::open_from(li.group, li.port, a.interface, ssm) {
                            Ok(s) => {
                                l.sock = Some(s);
                                first_join_ns.get_or_insert_with(net::realtime_ns);
                            }
                            Err(e) => eprintln!("layercast-player: join layer {k}: {e}"),
                        }
                    }
                }
                Action::Leave(k) => {
                    if let Some(l) = layers.get_mut(k as usize) {
                        l.sock = None; // Drop issues IP_DROP_MEMBERSHIP
                        l.bunch_start = None;
                        l.held.clear();
                        l.quarantine = false;
                        l.first_held = None;
                    }
                }
                Action::Exit => exit_requested = true,
                Action::SendFeedback(b) => {
                    if let Some((fb, _)) = tfmcc.as_mut() {
                        fb.send(&b, info.as_ref());
                    }
                }
            }
        }
        if let Some(v) = video.as_mut() {
            v.set_layers(layers.iter().filter(|l| l.sock.is_some()).count());
            // Join-time key picture: while layer 0 is held and nothing has been decoded yet,
            // ask the server for a key picture (again every KEY_REQUEST_RETRY), so a joining
            // player does not wait up to a whole periodic key interval.
            let base_held = layers.first().is_some_and(|l| l.sock.is_some());
            if base_held && v.decoded == 0 {
                if let Some(url) = key_url.as_deref() {
                    if last_key_request.is_none_or(|t: Instant| t.elapsed() >= KEY_REQUEST_RETRY) {
                        last_key_request = Some(Instant::now());
                        v.key_requests += 1;
                        let url = url.to_string();
                        std::thread::spawn(move || {
                            let _ = http_client::request(
                                "POST",
                                &url,
                                Some(b""),
                                Duration::from_millis(500),
                            );
                        });
                    }
                }
            } else if !base_held {
                last_key_request = None;
            }
            if let (Some(sl), Some(url)) = (v.take_sync_request(), key_url.as_deref()) {
                v.key_requests += 1;
                let url = format!("{url}?spatial={sl}");
                std::thread::spawn(move || {
                    let _ =
                        http_client::request("POST", &url, Some(b""), Duration::from_millis(500));
                });
            }
            v.tick(net::realtime_ns());
        }
        // Issue 21: audio joins and leaves with layer 0, plays on its own clock, and the
        // video's pictures are scheduled against it.
        let base_held = layers.first().is_some_and(|l| l.sock.is_some());
        audio_net.sync(base_held, info.as_ref(), a.interface, ssm);
        if let Some(x) = audio.as_mut() {
            x.tick(net::realtime_ns());
        }
        if let Some(v) = video.as_mut() {
            v.audio_clock = audio.as_ref().and_then(|x| x.clock());
        }
        // 8. Once a second: log, telemetry, metrics.
        if Instant::now() >= next_tick {
            let dt = last_tick.elapsed().as_secs_f64().max(1e-3);
            last_tick = Instant::now();
            next_tick += Duration::from_secs(1);
            if next_tick < Instant::now() {
                next_tick = Instant::now() + Duration::from_secs(1);
            }
            ticks += 1;
            if ticks.is_multiple_of(TRIM_EVERY_TICKS) {
                trim_heap();
            }
            let held = layers.iter().filter(|l| l.sock.is_some()).count() as u32;
            let stats = ctl.as_ref().map(|c| c.stats());
            let n_layers = stats.as_ref().map(|s| s.layers as u32).unwrap_or(held);
            let max_layers = info.as_ref().map(|i| i.layers.len()).unwrap_or(0) as u32;
            let subscribed = info
                .as_ref()
                .map(|i| {
                    if n_layers == 0 {
                        0.0
                    } else {
                        i.cumulative_rate(n_layers as usize - 1)
                    }
                })
                .unwrap_or(0.0);
            let sec = std::mem::take(&mut tally.sec);
            let total = tally.total.clone();
            let rate_bps = sec.bytes as f64 * 8.0 / dt;
            let sec_loss = if sec.packets + sec.lost > 0 {
                sec.lost as f64 / (sec.packets + sec.lost) as f64
            } else {
                0.0
            };
            let mut g = std::mem::take(&mut tally.gaps_ns);
            g.sort_unstable();
            let gap_med = g.get(g.len() / 2).copied();
            let est = stats.as_ref().and_then(|s| s.estimate_bps);
            let tf_json = tfmcc.as_ref().map(|(fb, v)| {
                let mut j = v.lock().map(|v| v.json()).unwrap_or_default();
                j["feedback_sent"] = json!(fb.sent);
                j["feedback_errors"] = json!(fb.errors + fb.no_address);
                j
            });
            let loss_ratio = stats.as_ref().map(|s| s.loss_ratio).unwrap_or(sec_loss);
            let line = json!({
                "t": net::realtime_ns() as f64 / 1e9,
                "elapsed_s": start_wall.elapsed().as_secs_f64(),
                "cpu_s": net::process_cpu_s(),
                "session_id": info.as_ref().map(|i| i.session_id),
                "protocol": protocol,
                "layers": n_layers, "sockets": held, "max_layers": max_layers,
                "subscribed_bps": subscribed, "rate_bps": rate_bps,
                "estimate_bps": est, "loss_ratio": loss_ratio, "loss_ratio_1s": sec_loss,
                "packets_received": total.packets, "packets_lost": total.lost,
                "packets_1s": sec.packets, "lost_1s": sec.lost,
                "pp_samples": g.len(), "pp_gap_us_median": gap_med.map(|x| x as f64 / 1e3),
                "pp_bps_median_payload": gap_med.and_then(|x| info.as_ref().map(|i| 8.0 * i.packet_size as f64 / (x as f64 / 1e9))),
                "join_to_first_packet_ms": match (first_join_ns, tally.first_packet_ts) {
                    (Some(j), Some(f)) => Some(f.saturating_sub(j) as f64 / 1e6),
                    _ => None,
                },
                "max_gap_ms": std::mem::take(&mut tally.max_gap_sec) as f64 / 1e6,
                "decisions": pending_decisions,
                "tfmcc": tf_json,
                "video": video.as_mut().map(|v| {
                    let mut j = video_totals(v);
                    j["frames_1s"] = json!(v.frames_1s);
                    v.frames_1s = 0;
                    v.overlay(&format!(
                        "layers {n_layers}/{max_layers}  {}x{}  {:.1} fps\nrate {:.0} kbit/s  loss {:.2} %\nestimate {}{}",
                        v.width, v.height, j["frames_1s"].as_f64().unwrap_or(0.0) / dt,
                        rate_bps / 1e3, 100.0 * loss_ratio,
                        est.map_or("-".into(), |e| format!("{:.0} kbit/s", e / 1e3)),
                        audio.as_ref().map_or(String::new(), |x| format!(
                            "\naudio {:.0} dBFS  concealed {}", x.level_db().max(-99.0), x.stats.concealed))));
                    j["on_audio_clock"] = json!(v.on_audio_clock);
                    j["av_late_dropped"] = json!(v.av_late_dropped);
                    j["framelog"] = v.framelog_json();
                    j["join_to_first_frame_ms"] = json!(first_join_ns.and_then(|jn| v
                        .first_shown_ns
                        .map(|f| f.saturating_sub(jn) as f64 / 1e6)));
                    j["join_to_first_decode_ms"] = json!(first_join_ns.and_then(|jn| v
                        .first_decoded_ns
                        .map(|f| f.saturating_sub(jn) as f64 / 1e6)));
                    j
                }),
                "audio": audio.as_mut().map(|x| { x.flush(); let mut j = x.json();
                    j["auth_failed"] = json!(audio_net.auth_failed); j }),
                "stale_resets": tally.stale_resets,
                "restart": {"episodes": limbo.stats.episodes, "held": limbo.stats.held,
                    "replayed": limbo.stats.replayed, "flushed": limbo.stats.flushed,
                    "dropped": limbo.stats.dropped},
                "dropped": {"malformed_rtp": drops.malformed_rtp, "missing_cc": drops.missing_cc,
                    "bad_cc": drops.bad_cc, "wrong_layer": drops.wrong_layer,
                    "truncated": drops.truncated, "malformed_sam": drops.malformed_sam,
                    "stale": drops.stale,
                    "malformed_announcement": drops.malformed_announcement,
                    "media_auth_failed": drops.media_auth_failed,
                    "sam_before_description": drops.sam_before_description,
                    "old_session": drops.old_session},
                "security": {"sam": sam_json(sam.as_ref(), &sam_gate), "encrypted": opener.is_some(),
                    "ssm_source": ssm.map(|s| s.to_string()),
                    "opened": opened, "open_ns_total": open_ns},
            });
            if let Some(f) = log.as_mut() {
                let _ = writeln!(f, "{line}");
                let _ = f.flush();
            }
            if !a.headless {
                eprintln!(
                    "layers {n_layers}/{max_layers} rate {:.0} kbit/s est {} loss {:.3}",
                    rate_bps / 1e3,
                    est.map(|e| format!("{:.0} kbit/s", e / 1e3))
                        .unwrap_or("-".into()),
                    loss_ratio
                );
            }
            if let (Some(tx), Some(sid)) = (&tele_tx, &a.session_name) {
                let body = json!({
                    "viewer_id": a.viewer_id, "session_id": sid, "protocol": protocol,
                    "layers": n_layers, "max_layers": max_layers, "rate_bps": rate_bps,
                    "estimate_bps": est, "loss_ratio": loss_ratio.clamp(0.0, 1.0),
                    "packets_received": total.packets, "packets_lost": total.lost,
                    "width": video.as_ref().map_or(0, |v| v.width),
                    "height": video.as_ref().map_or(0, |v| v.height),
                    "fps": line["video"]["frames_1s"].as_f64().unwrap_or(0.0) / dt,
                    "frames": video.as_ref().map_or(0, |v| v.frames),
                    "freezes": video.as_ref().map_or(0, |v| v.freezes),
                    "rtt_s": stats.as_ref().and_then(|s| s.rtt_s),
                    "audio_packets": audio.as_ref().map_or(0, |x| x.stats.packets),
                    "audio_lost": audio.as_ref().map_or(0, |x| x.stats.lost),
                    "audio_concealed": audio.as_ref().map_or(0, |x| x.stats.concealed),
                    "decisions": pending_decisions,
                    "tfmcc": tf_json,
                });
                let _ = tx.send(body);
            }
            pending_decisions = Vec::new();
            if a.metrics_addr.is_some() {
                let mut m = String::new();
                let lab = format!("{{viewer=\"{}\"}}", a.viewer_id);
                m.push_str(&format!("# TYPE layercast_player_layers gauge\nlayercast_player_layers{lab} {n_layers}\n"));
                m.push_str(&format!("# TYPE layercast_player_rate_bps gauge\nlayercast_player_rate_bps{lab} {rate_bps}\n"));
                m.push_str(&format!("# TYPE layercast_player_estimate_bps gauge\nlayercast_player_estimate_bps{lab} {}\n", est.unwrap_or(f64::NAN)));
                m.push_str(&format!("# TYPE layercast_player_packets_received_total counter\nlayercast_player_packets_received_total{lab} {}\n", total.packets));
                m.push_str(&format!("# TYPE layercast_player_bytes_received_total counter\nlayercast_player_bytes_received_total{lab} {}\n", total.bytes));
                m.push_str(&format!("# TYPE layercast_player_packets_lost_total counter\nlayercast_player_packets_lost_total{lab} {}\n", total.lost));
                if let Some((fb, v)) = tfmcc.as_ref() {
                    m.push_str(&crate::tfmcc::metrics(&lab, fb, v));
                }
                if let Some(x) = audio.as_ref() {
                    m.push_str(&x.metrics(&lab));
                }
                m.push_str("# TYPE layercast_player_dropped_total counter\n");
                for (r, v) in [
                    ("malformed_rtp", drops.malformed_rtp),
                    ("missing_cc", drops.missing_cc),
                    ("bad_cc", drops.bad_cc),
                    ("wrong_layer", drops.wrong_layer),
                    ("truncated", drops.truncated),
                    ("malformed_sam", drops.malformed_sam),
                    ("malformed_announcement", drops.malformed_announcement),
                    ("media_auth_failed", drops.media_auth_failed),
                    ("old_session", drops.old_session),
                    (
                        "sam_unsigned",
                        sam.as_ref().map_or(0, |v| v.stats().unsigned),
                    ),
                    (
                        "sam_bad_signature",
                        sam.as_ref().map_or(0, |v| v.stats().bad_signature),
                    ),
                    ("sam_stale", sam.as_ref().map_or(0, |v| v.stats().stale)),
                    (
                        "sam_replayed",
                        sam.as_ref().map_or(0, |v| v.stats().replayed),
                    ),
                    (
                        "sam_malformed",
                        sam.as_ref().map_or(0, |v| v.stats().malformed),
                    ),
                ] {
                    m.push_str(&format!(
                        "layercast_player_dropped_total{{viewer=\"{}\",reason=\"{r}\"}} {v}\n",
                        a.viewer_id
                    ));
                }
                if let Ok(mut t) = metrics_text.lock() {
                    *t = m;
                }
            }
        }
    }
    // TFMCC: a last report with the leave flag (RFC 4654 §3.3), so that the sender replaces a
    // leaving CLR at once instead of after its 10·T timeout (tfrc-tfmcc-pcc.md E13).
    if let (Some(c), Some((fb, view))) = (ctl.as_mut(), tfmcc.as_mut()) {
        if let Ok(mut v) = view.lock() {
            v.leave_requested = true;
        }
        c.handle_timeout(Time(net::realtime_ns()));
        while let Some(act) = c.poll_action() {
            if let Action::SendFeedback(b) = act {
                fb.send(&b, info.as_ref());
            }
        }
    }
    // Clean leave: drop every membership before exiting.
    for l in layers.iter_mut() {
        l.sock = None;
    }
    if let Some(f) = log.as_mut() {
        let _ = writeln!(
            f,
            "{}",
            json!({"event": "exit", "elapsed_s": start_wall.elapsed().as_secs_f64(),
            "packets_received": tally.total.packets, "packets_lost": tally.total.lost,
            "video": video.as_mut().map(video_totals)})
        );
    }
    stop.store(true, Ordering::Relaxed);
    drop(tele_tx);
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// The video counters since start. The last per-second line can be up to a second old when
/// the player stops, so the exit line carries them too: its `frames` is the number of rows of
/// `frames.csv`.
fn video_totals(v: &mut crate::video::Video) -> serde_json::Value {
    let st = v.stats();
    let (fec_recovered, fec_repairs) = v.fec_totals();
    json!({"fec_recovered": fec_recovered, "fec_repairs": fec_repairs, "frames": v.frames, "decoded": v.decoded, "late_frames": v.late_frames,
        "width": v.width, "height": v.height, "freezes": v.freezes,
        "decoder_errors": v.decoder_errors, "push_errors": v.push_errors,
        "pictures": st.pictures, "pictures_skipped": st.pictures_skipped,
        "frames_incomplete": st.frames_incomplete, "late": st.late,
        "malformed": st.malformed, "key_requests": v.key_requests,
        "hidden": v.hidden})
}

#[cfg(test)]
mod stale_tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A flushed router queue (a burst of old packets between fresh ones) is dropped and the
    /// floor stays; a delay rise that lasts rebuilds the floor after `RESTALE_NS` instead of
    /// locking the session out.
    #[test]
    fn stale_burst_dropped_lasting_rise_rebuilds_the_floor() {
        let mut t = Tally::default();
        // 2 s of packets at 20 ms delay, one every 10 ms.
        let mut ts = 0;
        for _ in 0..200 {
            ts += 10 * MS;
            assert!(!t.is_stale(ts, 20_000));
            t.note_offset(ts, 20_000);
        }
        // A flushed queue: 50 packets 3 s old within 5 ms, then fresh packets again.
        for i in 0..50 {
            assert!(t.is_stale(ts + i * 100_000, 3_000_000));
        }
        ts += 10 * MS;
        assert!(!t.is_stale(ts, 21_000));
        assert_eq!(t.stale_resets, 0);
        // The path's delay rises by 800 ms and stays: stale for just under 1 s, then the floor
        // moves up to the run's least delay and packets are fed again.
        let mut dropped = 0;
        let mut fed_at = None;
        for _ in 0..300 {
            ts += 10 * MS;
            if t.is_stale(ts, 820_000) {
                dropped += 1;
            } else {
                fed_at.get_or_insert(ts);
                t.note_offset(ts, 820_000);
            }
        }
        assert_eq!(t.stale_resets, 1);
        assert_eq!(
            dropped, 100,
            "stale for RESTALE_NS of arrival time, then fed"
        );
        assert_eq!(t.min_offset(), Some(820_000));
        assert!(fed_at.is_some());
        // A later fall in delay is simply the new minimum.
        ts += 10 * MS;
        assert!(!t.is_stale(ts, 20_000));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    /// Counts this thread's allocations (tests run in parallel threads; each counts its own).
    struct Counting;
    thread_local! {
        static ALLOCS: Cell<usize> = const { Cell::new(0) };
    }
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
            unsafe { System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
            unsafe { System.realloc(p, l, n) }
        }
    }
    #[global_allocator]
    static A: Counting = Counting;

    fn allocs_during(f: impl FnOnce()) -> usize {
        let before = ALLOCS.with(Cell::get);
        f();
        ALLOCS.with(Cell::get) - before
    }

    /// An ERA RAI decision as it looks at 10 Mbit/s: a few named inputs and every pair sample.
    fn rai_decision(samples: usize) -> Decision {
        let mut inputs = vec![("r_pp", 9.5e6), ("plr", 0.0), ("r_before", 1e7)];
        inputs.extend((0..samples).map(|i| ("pp_sample", 9e6 + i as f64)));
        inputs.push(("r_after", 1e7));
        inputs.push(("rtt", f64::NAN));
        Decision {
            at: Time(1_000_000_000),
            from_layers: 10,
            to_layers: 10,
            reason: "rai",
            inputs,
        }
    }

    fn pkt(layer: usize, ssrc: u32, seq: u16, ts: u64) -> Pkt {
        Pkt {
            ts,
            layer,
            cc: CcFields {
                layer: layer as u8,
                bunch_pos: 0,
                bunch_len: 1,
                send_time_us: ts / 1_000,
            },
            seq,
            ssrc,
            size: 100,
            data: vec![0; 100],
            ext: Vec::new(),
        }
    }

    #[test]
    fn limbo_keeps_the_oldest_packets_within_its_bounds() {
        let mut l = Limbo::default();
        assert!(!l.active());
        l.begin(1_000);
        l.begin(2_000); // already holding: same episode
        assert_eq!(l.stats.episodes, 1);
        for i in 0..LIMBO_MAX_PACKETS + 10 {
            l.push(i % 3, &[i as u8; 8], 1_000 + i as u64);
        }
        assert_eq!(l.stats.held, LIMBO_MAX_PACKETS as u64);
        assert_eq!(l.stats.dropped, 10);
        assert!(!l.expired(1_000 + LIMBO_MAX_NS - 1));
        assert!(l.expired(1_000 + LIMBO_MAX_NS));
        let got = l.take();
        assert!(!l.active());
        assert_eq!(got.len(), LIMBO_MAX_PACKETS);
        // Arrival order, the first packets (the key picture) kept, the last ones refused.
        assert_eq!(got[0], (0, vec![0u8; 8], 1_000));
        assert!(got.windows(2).all(|w| w[0].2 < w[1].2));
        assert_eq!(got.last().unwrap().2, 1_000 + LIMBO_MAX_PACKETS as u64 - 1);
        // Byte bound: a few large datagrams fill it before the packet bound.
        let mut l = Limbo::default();
        l.begin(0);
        let big = vec![0u8; 2048];
        for i in 0..LIMBO_MAX_BYTES / 2048 + 5 {
            l.push(0, &big, i as u64);
        }
        assert_eq!(l.stats.held, (LIMBO_MAX_BYTES / 2048) as u64);
        assert_eq!(l.stats.dropped, 5);
        // Nothing to feed them to (the new session has no video): counted as dropped.
        l.release(None, true);
        assert_eq!(l.stats.dropped, 5 + (LIMBO_MAX_BYTES / 2048) as u64);
        assert_eq!(l.stats.replayed, 0);
        assert!(!l.active() && l.take().is_empty());
    }

    #[test]
    fn a_new_ssrc_on_a_received_layer_is_a_new_sender_and_the_old_one_is_retired() {
        let (mut t, mut limbo) = (Tally::default(), Limbo::default());
        let mut layers: Vec<Layer> = (0..2).map(|_| Layer::default()).collect();
        // First session: both layers, SSRCs 10 and 11. A first join is not a restart.
        for s in 0..5u16 {
            feed(
                &mut layers[0],
                None,
                None,
                &mut limbo,
                &mut t,
                pkt(0, 10, s, 1_000 + s as u64),
            );
            feed(
                &mut layers[1],
                None,
                None,
                &mut limbo,
                &mut t,
                pkt(1, 11, s, 1_000 + s as u64),
            );
        }
        assert!(t.new_ssrcs.is_empty());
        assert_eq!(t.total.lost, 0);
        // Restarted sender: layer 0 already gets SSRC 20 (sequence numbers from 0 again, not a
        // loss burst), layer 1 has not seen the new sender yet.
        feed(
            &mut layers[0],
            None,
            None,
            &mut limbo,
            &mut t,
            pkt(0, 20, 60_000, 9_000),
        );
        feed(
            &mut layers[0],
            None,
            None,
            &mut limbo,
            &mut t,
            pkt(0, 20, 60_001, 9_001),
        );
        assert_eq!(t.total.lost, 0);
        assert_eq!(t.new_ssrcs, vec![20]);
        assert_eq!((layers[0].ssrc, layers[0].prev_ssrc), (Some(20), Some(10)));
        // No video path here, so nothing is held.
        assert!(!limbo.active());
        // The old session's SSRCs are retired, the new sender's are not.
        assert_eq!(previous_session_ssrcs(&layers, &t.new_ssrcs), vec![10, 11]);
    }

    #[test]
    fn decision_json_keeps_the_last_of_repeated_inputs_and_drops_non_finite() {
        let j = decision_json(&rai_decision(600));
        let inputs = j["inputs"].as_object().unwrap();
        assert_eq!(inputs.len(), 5, "{inputs:?}");
        assert_eq!(inputs["pp_sample"].as_f64(), Some(9e6 + 599.0));
        assert_eq!(inputs["r_after"].as_f64(), Some(1e7));
        assert!(!inputs.contains_key("rtt"));
        assert_eq!(j["reason"], "rai");
        assert_eq!(j["to"], 10);
    }

    /// The player's per-RAI churn: turning a decision into JSON must not cost an allocation
    /// per repeated input. It cost about 2 per sample (a `String` key and a pair in one large
    /// temporary vector), which fragmented the heap and made RssAnon climb (issue 9's soak).
    #[test]
    fn decision_json_allocations_do_not_grow_with_repeated_inputs() {
        let (small, large) = (rai_decision(10), rai_decision(1000));
        let a_small = allocs_during(|| drop(decision_json(&small)));
        let a_large = allocs_during(|| drop(decision_json(&large)));
        assert!(a_small > 0, "the counter counts nothing");
        assert_eq!(
            a_large, a_small,
            "1000 samples cost {a_large} allocations, 10 cost {a_small}"
        );
    }
}
