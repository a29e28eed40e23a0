//! Video receive path: per-layer RTP packets -> `codec::depay::Assembler` (reorder, picture
//! assembly from the held layer prefix, switch points) -> `codec::vpx::Decoder` -> playout
//! buffer -> at display time: `DIR/frames.jsonl`, the frame log (`DIR/frames.csv` and y4m
//! segments, `framelog`), the window (`window`).

use crate::playout::PlayoutClock;
use codec::depay::{Assembler, AssemblerConfig, AssemblerStats};
use codec::ladder::LayerLadder;
use codec::rtp::RtpPacket;
use codec::vpx::Decoder;
use congestion::SessionInfo;
use serde_json::json;
use std::collections::VecDeque;
use std::io::Write;

/// Decoder-side state of one video session.
pub struct Video {
    asm: Assembler,
    dec: Decoder,
    top: Option<usize>,
    pub frames: u64,
    pub frames_1s: u64,
    pub decoder_errors: u64,
    pub push_errors: u64,
    pub width: u32,
    pub height: u32,
    pub freezes: u64,
    freeze: crate::freeze::FreezeDetector,
    last_frame_ns: Option<u64>,
    log: Option<std::fs::File>,
    /// Decoded frames waiting for their display time.
    playout: VecDeque<Pending>,
    framelog: Option<crate::framelog::FrameLog>,
    window: Option<crate::window::Window>,
    /// Kernel time of the first and the latest packet per RTP timestamp (picture), newest
    /// last.
    arrivals: VecDeque<(u32, u64, u64)>,
    held: usize,
    /// Breaks of the base layer's chain logged so far, and when the layers held last
    /// changed (for the log line).
    base_breaks_logged: u64,
    layers_changed_ns: u64,
    /// Wall clock when the first picture was decoded (unix ns).
    pub first_decoded_ns: Option<u64>,
    /// ... and when it was shown.
    pub first_shown_ns: Option<u64>,
    clock: PlayoutClock,
    /// Frames decoded after their display time (shown at once, the clock does not slip).
    pub late_frames: u64,
    pub decoded: u64,
    /// Key pictures asked of the server (join time, `receiver`).
    pub key_requests: u64,
    /// Decoded pictures not shown: below the steady spatial layer (`ShowFilter`).
    pub hidden: u64,
    /// Upper spatial layers (bit s) to ask the server to re-sync: joined and held for
    /// `resync_delay_ns` without a switch point (`sync_wait`), or left out of a picture
    /// released before its repair came (`release_unrepaired`).
    sync_request: u8,
    /// Per spatial layer: when it was joined, while the player waits for its switch point
    /// before asking for a re-sync (see [`RESYNC_DELAY_MS`]).
    sync_wait: [Option<u64>; 8],
    /// A picture above spatial layer 0 has been decoded (the viewer's join is over).
    upper_decoded: bool,
    resync_delay_ns: u64,
    show: ShowFilter,
    /// Every layer on one stream (TFMCC): the layer of a packet comes from its payload
    /// descriptor, and holding the stream means holding every layer.
    single_stream: bool,
    /// Issue 21: the video streams' RTP ↔ capture-time mapping (layer 0's RTCP sender
    /// report; every layer shares the picture's timestamp) and the audio clock. With both,
    /// pictures are shown when the audio of their capture time plays (audio is the master).
    /// Set through [`Video::set_av`].
    sender_report: Option<crate::audio::SrMap>,
    audio_clock: Option<crate::audio::AudioClock>,
    /// Pictures scheduled on the audio clock.
    pub on_audio_clock: u64,
    /// Pictures decoded after their sound had played (by more than [`AV_LATE_DROP_NS`]) and
    /// not shown, and how many in a row.
    pub av_late_dropped: u64,
    av_late_run: u32,
    /// How much later than the audio clock the video's own playout buffer wanted a picture
    /// since the last [`Video::take_audio_need`] (0: never later).
    audio_need_ns: u64,
    /// The largest (own display time - capture time) of the pictures scheduled on the audio
    /// clock since the last [`Video::take_audio_floor`].
    audio_floor_ns: Option<i64>,
    /// The layers below the top spatial layer on a decoder of their own (`crate::lower`):
    /// `None` with `--single-decoder`.
    lower: Option<crate::lower::Lower>,
    /// Pictures shown from the lower path: their top frame was not decoded by their slot.
    pub shown_lower: u64,
    /// The lower path has stood in since it last became active
    /// ([`PlayoutClock::lower_path_starts`]).
    lower_observed: bool,
    /// RTP timestamp of the newest picture scheduled for display (either path).
    newest_scheduled: Option<u32>,
    /// Lower-path pictures waiting for their slot, oldest first.
    stand_ins: VecDeque<StandIn>,
    /// The wall clock (unix ns) decode times are read from (tests run it virtually).
    now: fn() -> u64,
}

/// Default `--resync-delay-ms`: how long a newly joined upper spatial layer waits for a switch
/// point (a key picture, or a re-sync another viewer asked for) before this player asks the
/// server for one. A re-sync is as large as a key picture on its layer and every viewer of
/// that layer waits behind it in the layer's queue, so a join that a congestion controller
/// undoes within its next decision (ERA's and PLM's 1-s intervals) should not cost everyone
/// one; with key pictures every 2 s most joins that stay meet one first. Quality suite,
/// docs/player.md "Re-sync requests wait for a switch point first".
pub const RESYNC_DELAY_MS: u64 = 1500;

/// A picture decoded this long after the audio of its capture time played is dropped (lip
/// sync over smoothness; about two frame periods at 15 fps).
const AV_LATE_DROP_NS: u64 = 120_000_000;
/// A picture held by a lost upper-layer packet is released this long before it is due: about
/// one decode of the session's largest picture on a loaded core.
const DECODE_MARGIN_NS: u64 = 10_000_000;
/// ... unless this many pictures in a row were (then late pictures are shown).
const AV_LATE_DROP_MAX_RUN: u32 = 15;
/// The video's own playout wanting a picture this much later than its sound is what asks the
/// audio to move (less is within a display refresh or two).
const AV_FOLLOW_MIN_NS: u64 = 20_000_000;

/// A picture due further than this from its decode on the audio clock means the mapping is
/// wrong (a stale report, a restarted sender): the picture uses the video's own clock.
const AV_MAX_AHEAD_NS: u64 = 5_000_000_000;

/// Which decoded pictures are shown. A holder of 5 layers of L3T3 ((0,0..2), (1,0), (1,1))
/// gets 320x180 TL0/TL1 pictures and 160x90 TL2 pictures between them: shown as they come,
/// the resolution flickers every other picture (and so did the y4m segments of the frame
/// log). So only pictures that reach the *steady* spatial layer are shown: the highest
/// spatial layer whose held temporal layers give at least half the full frame rate (5
/// layers: spatial 1 at 7.5 of 15 fps). The others are still decoded (the decoder's
/// reference state needs them) but not shown (`hidden`). Below half the rate (4 layers:
/// spatial 1 at TL0 only, 3.75 fps) the lower layer is steady and everything is shown: the
/// viewer keeps the full frame rate rather than 3.75 fps at the sharper size. Only pictures that are *meant* to stop below the
/// steady layer (their temporal layer is not held there) are hidden: a picture the
/// subscription expects at the steady layer that arrives without it (that layer's frame was
/// late or lost, issue 20: "shows the layer below, scaled, instead of a frozen picture") is
/// shown. If no picture has reached the steady layer for [`STEADY_LAYER_STALE_NS`] (the layer
/// was just joined and waits for its switch point), lower pictures are shown rather than
/// nothing.
#[derive(Debug, Clone, Default)]
struct ShowFilter {
    /// Pictures whose top spatial layer is below this are decoded, not shown, if their
    /// temporal layer is not held at it.
    min_spatial: u8,
    /// Per temporal layer, the highest spatial layer the subscription holds it at.
    expected: Vec<u8>,
    /// Decode time of the last picture at `min_spatial` or above (ns).
    last_steady_ns: Option<u64>,
}

/// See [`ShowFilter`]: two steady-layer picture intervals at the lowest shown rate (7.5 fps)
/// plus margin.
const STEADY_LAYER_STALE_NS: u64 = 500_000_000;

impl ShowFilter {
    /// The subscription is layers 0..=`top` of `ladder`.
    fn set_top(&mut self, ladder: &LayerLadder, top: Option<usize>) {
        self.min_spatial = top.map_or(0, |k| ladder.steady_spatial(k));
        self.expected = (0..ladder.temporal_layers())
            .map(|t| {
                (0..ladder.spatial_layers())
                    .filter(|&s| top.is_some_and(|k| ladder.keeps(k, s, t)))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
    }

    /// Whether a picture of temporal layer `temporal` is meant to be shown at the steady
    /// layer or above: only such a picture is shown from the lower path in its place.
    fn stands_in(&self, temporal: u8) -> bool {
        self.expected
            .get(usize::from(temporal))
            .is_some_and(|&e| e >= self.min_spatial)
    }

    /// Whether a picture of temporal layer `temporal` whose top spatial layer is
    /// `top_spatial`, decoded at `now_ns`, is shown.
    fn show(&mut self, top_spatial: u8, temporal: u8, now_ns: u64) -> bool {
        if top_spatial >= self.min_spatial {
            self.last_steady_ns = Some(now_ns);
            return true;
        }
        if self.stands_in(temporal) {
            return true;
        }
        self.last_steady_ns
            .is_none_or(|t| now_ns.saturating_sub(t) > STEADY_LAYER_STALE_NS)
    }
}

/// When the audio of the picture with RTP timestamp `ts` plays (local ns), once the sender
/// report `sr` maps it to a capture time and an audio clock `ac` runs.
fn audio_time(
    sr: Option<crate::audio::SrMap>,
    ac: Option<crate::audio::AudioClock>,
    ts: u32,
) -> Option<u64> {
    Some(ac?.play_time(sr?.capture_of(ts)))
}

/// A decoded picture waiting for its display time.
struct Pending {
    due: u64,
    /// Placed on the audio clock (moves with it: [`Video::set_av`]).
    av: bool,
    /// A stand-in from the lower path.
    lower: bool,
    line: serde_json::Value,
    frame: crate::framelog::FrameMsg,
}

/// A picture decoded on the lower path, waiting for its slot: shown there if its top
/// version has not been scheduled by then.
struct StandIn {
    ts: u32,
    line: serde_json::Value,
    frame: crate::framelog::FrameMsg,
}

/// A stand-in is shown this long after its slot if its top version is still not in: a top
/// picture that late is less than a screen refresh (60 Hz) late, and a lower path picture
/// whose own lateness sizes the buffer has no slack before its slot at all.
const STAND_IN_GRACE_NS: u64 = 10_000_000;

/// Stand-ins held at most (2 s at 30 fps; a lower path that far ahead of its slots is not
/// waited on).
const MAX_STAND_INS: usize = 64;

/// `(spatial layers, temporal layers, fps, width, height)` of the session's VP9 track.
pub fn vp9_params(info: &SessionInfo) -> Option<(usize, usize, f64, u32, u32)> {
    match &info.track(proto::TrackKind::Video)?.codec {
        proto::Codec::Vp9(p) => Some((
            p.spatial as usize,
            p.temporal as usize,
            p.fps(),
            p.width as u32,
            p.height as u32,
        )),
        _ => None,
    }
}

/// The session's ladder: the announced streams' cells in their layer order (the SAM carries
/// each stream's (spatial, temporal)), spatial-major for a single stream carrying every cell
/// (TFMCC). The order is what matters here; rates are informative (kbit/s, ≥ 1). `None` when
/// the announced cells are not a valid ladder of the `ns` x `nt` grid.
fn ladder_of(info: &SessionInfo, ns: usize, nt: usize, single_stream: bool) -> Option<LayerLadder> {
    let kbps = |k: usize| {
        info.layers
            .get(k)
            .filter(|_| !single_stream)
            .map_or(1, |l| ((l.rate_bps / 1000) as u32).max(1))
    };
    let streams = info
        .track(proto::TrackKind::Video)
        .map(|t| &t.streams[..])
        .unwrap_or(&[]);
    if !single_stream && streams.len() == ns * nt {
        let mut cells = vec![None; ns * nt];
        for st in streams {
            let slot = cells.get_mut(usize::from(st.layer))?;
            if slot.is_some() {
                return None;
            }
            *slot = Some(codec::ladder::Cell {
                spatial: st.spatial,
                temporal: st.temporal,
            });
        }
        let cells = cells.into_iter().collect::<Option<Vec<_>>>()?;
        let l = LayerLadder::new(cells, (0..ns * nt).map(kbps).collect()).ok()?;
        return (usize::from(l.spatial_layers()) == ns && usize::from(l.temporal_layers()) == nt)
            .then_some(l);
    }
    let rows: Vec<Vec<u32>> = (0..ns)
        .map(|s| (0..nt).map(|t| kbps(s * nt + t)).collect())
        .collect();
    LayerLadder::spatial_major(&rows).ok()
}

impl Video {
    /// A video path for this session, or `None` if it carries no (known) video.
    /// `prev` is the video path of the previous session (a restarted sender): its logs and
    /// window carry on, so `frames.csv` keeps one row per picture across the restart.
    pub fn new(info: &SessionInfo, a: &crate::Args, prev: Option<Video>) -> Option<Video> {
        let out = a.out.as_deref();
        let (ns, nt, fps, top_w, top_h) = vp9_params(info)?;
        // One announced layer for an SVC codec: a TFMCC session, every cell on one stream
        // (docs/protocols/tfmcc.md "Live video"); packets are told apart by their payload
        // descriptors.
        let single_stream = info.layers.len() == 1 && ns * nt > 1;
        if (ns * nt != info.layers.len() && !single_stream) || ns == 0 || nt == 0 {
            return None;
        }
        let ladder = ladder_of(info, ns, nt, single_stream)?;
        let dec = Decoder::new(1).ok()?;
        let (mut log, mut framelog, mut window) = (None, None, None);
        if let Some(p) = prev {
            let mut p = p;
            log = p.log.take();
            framelog = p.framelog.take();
            window = p.window.take();
        }
        if log.is_none() {
            log = out.and_then(|d| std::fs::File::create(d.join("frames.jsonl")).ok());
        }
        if framelog.is_none() {
            if let Some(d) = out {
                match crate::framelog::FrameLog::start(d, !a.no_pictures, fps, a.qr_every) {
                    Ok(f) => framelog = Some(f),
                    Err(e) => eprintln!("layercast-player: frame log in {}: {e}", d.display()),
                }
            }
        }
        if window.is_none() && a.window {
            let (w, h) = (top_w, top_h);
            match crate::window::Window::open(w, h, fps) {
                Ok(win) => window = Some(win),
                Err(e) => eprintln!("layercast-player: no window ({e}); running headless"),
            }
        }
        // Layers reach the receiver with different delays: each is paced at its own constant
        // rate, so a key picture's upper frames wait in their layers' sender queues for up to
        // ~1 s while other layers' packets of later pictures go ahead. A frame of a lagging
        // layer is waited for up to 1.5 s of pictures (`patience_pictures`); a frame whose own
        // layer has moved 0.5 s of pictures past it is lost, not late (its FEC repair had that
        // long to come), and is given up then instead of holding every later picture for the
        // whole 1.5 s (docs/player.md "Late and lost layers").
        let conf = AssemblerConfig {
            reorder_pictures: (0.5 * fps).ceil().max(4.0) as u64,
            patience_pictures: (1.5 * fps).ceil().max(8.0) as u64,
            max_pending: ((3.0 * fps).ceil() as usize).max(32),
        };
        let lower = match a.single_decoder {
            true => None,
            false => crate::lower::Lower::new(ladder.clone(), conf),
        };
        Some(Video {
            asm: Assembler::new(ladder, None, conf),
            dec,
            top: None,
            frames: 0,
            frames_1s: 0,
            decoder_errors: 0,
            push_errors: 0,
            width: 0,
            height: 0,
            freezes: 0,
            freeze: Default::default(),
            last_frame_ns: None,
            log,
            playout: VecDeque::new(),
            framelog,
            window,
            arrivals: VecDeque::new(),
            base_breaks_logged: 0,
            layers_changed_ns: 0,
            held: 0,
            first_decoded_ns: None,
            first_shown_ns: None,
            clock: PlayoutClock::new(
                a.playout_delay_ms.unwrap_or(0) * 1_000_000,
                a.playout_max_jitter_ms * 1_000_000,
                a.playout_quantile,
                a.playout_window_ms * 1_000_000,
            )
            .with_top_quantile(a.playout_top_quantile)
            .with_long_window(a.playout_long_window_ms * 1_000_000),
            late_frames: 0,
            decoded: 0,
            key_requests: 0,
            hidden: 0,
            sync_request: 0,
            sync_wait: [None; 8],
            upper_decoded: false,
            resync_delay_ns: a.resync_delay_ms * 1_000_000,
            show: ShowFilter::default(),
            single_stream,
            sender_report: None,
            audio_clock: None,
            on_audio_clock: 0,
            av_late_dropped: 0,
            av_late_run: 0,
            audio_need_ns: 0,
            audio_floor_ns: None,
            lower,
            shown_lower: 0,
            lower_observed: false,
            newest_scheduled: None,
            stand_ins: VecDeque::new(),
            now: crate::net::realtime_ns,
        })
    }

    /// The number of layers held changed.
    pub fn set_layers(&mut self, held: usize) {
        if held != self.held {
            self.layers_changed_ns = (self.now)();
        }
        self.held = held;
        let top = match self.single_stream {
            true if held > 0 => Some(self.asm.ladder().len() - 1),
            _ => held.checked_sub(1),
        };
        if top != self.top {
            // A newly held upper spatial layer decodes from its next switch point: once it
            // has been held for `resync_delay_ns` without one, ask the server to re-sync it
            // (`take_sync_requests`). Before anything decoded, the key request covers it.
            let spatial =
                |k: Option<usize>| k.and_then(|k| self.asm.ladder().cell(k)).map(|c| c.spatial);
            let (new, old) = (spatial(top), spatial(self.top));
            if let Some(new) = new {
                if new > 0 && old.is_none_or(|o| new > o) && self.decoded > 0 {
                    // The first climb above the base layer asks at once: that is the
                    // viewer's join, and before the lower path has a picture to stand in
                    // with, a switch point that comes late is a freeze.
                    if self.upper_decoded {
                        self.sync_wait[new.min(7) as usize].get_or_insert((self.now)());
                    } else {
                        self.sync_request |= 1 << new.min(7);
                    }
                }
            }
            // Layers left are no longer waited for.
            for (s, w) in self.sync_wait.iter_mut().enumerate() {
                if new.is_none_or(|n| s > n as usize) {
                    *w = None;
                }
            }
            self.top = top;
            self.asm.set_top_layer(top);
            self.show.set_top(self.asm.ladder(), top);
            if let Some(l) = self.lower.as_mut() {
                l.set_top(top);
            }
        }
    }

    /// The spatial layers (bit s) to ask the server to re-sync, once (see `set_layers` and
    /// `release_unrepaired`): a joined layer once it has waited `resync_delay_ns` for a
    /// switch point.
    pub fn take_sync_requests(&mut self) -> u8 {
        let now = (self.now)();
        for (s, w) in self.sync_wait.iter_mut().enumerate() {
            if w.is_some_and(|t| now.saturating_sub(t) >= self.resync_delay_ns) {
                *w = None;
                self.sync_request |= 1 << s;
            }
        }
        std::mem::take(&mut self.sync_request)
    }

    /// Releases, on each path, the pictures held only for a repair once they are due on
    /// screen ([`crate::lower::release_due`]); the top path asks for the re-sync of the
    /// spatial layers it left out.
    fn release_unrepaired(&mut self, now_ns: u64) {
        let (sr, ac, clock) = (self.sender_report, self.audio_clock, &self.clock);
        let due = |ts: u32| {
            audio_time(sr, ac, ts)
                .or_else(|| clock.slot(ts))
                .is_some_and(|slot| now_ns + DECODE_MARGIN_NS >= slot)
        };
        self.sync_request |= crate::lower::release_due(&mut self.asm, due);
        if let Some(l) = self.lower.as_mut() {
            l.release_due(due);
        }
    }

    /// How much more delay the video's own playout buffer wanted than the audio clock gave
    /// since the last call (0: none); the host raises the audio's delay by it.
    pub fn take_audio_need(&mut self) -> u64 {
        std::mem::take(&mut self.audio_need_ns)
    }

    /// The video's capture-time mapping and the audio clock. When only the audio clock moved
    /// (its delay was raised, or frames were cut short to lower it), the pictures already
    /// waiting for display move with it: they were placed on the old clock, and would show
    /// that much before or after their sound (during a lowering, 10 % of the time they wait).
    pub fn set_av(
        &mut self,
        sender_report: Option<crate::audio::SrMap>,
        audio_clock: Option<crate::audio::AudioClock>,
    ) {
        if let (true, Some(old), Some(new)) = (
            sender_report == self.sender_report,
            self.audio_clock,
            audio_clock,
        ) {
            let d = new.offset_ns - old.offset_ns;
            if d != 0 && d.unsigned_abs() < AV_MAX_AHEAD_NS {
                let floor = self.last_frame_ns.unwrap_or(0);
                let moved = |t: u64| ((t as i64 + d).max(0) as u64).max(floor);
                for p in self.playout.iter_mut().filter(|p| p.av) {
                    p.due = moved(p.due);
                }
                self.playout.make_contiguous().sort_by_key(|p| p.due);
                if self.playout.back().is_some_and(|p| p.av) {
                    self.clock.last_due = moved(self.clock.last_due);
                }
            }
        }
        self.sender_report = sender_report;
        self.audio_clock = audio_clock;
    }

    /// The smallest audio clock offset (local time less capture time) at which every picture
    /// scheduled on the audio clock since the last call would still have been shown when the
    /// video's own buffer wanted it (`None`: no such picture); the host lowers the audio's
    /// delay towards it.
    pub fn take_audio_floor(&mut self) -> Option<i64> {
        self.audio_floor_ns.take()
    }

    /// When the audio of the picture with RTP timestamp `ts` plays (local ns), once the sender
    /// report maps it to a capture time and an audio clock runs.
    fn audio_time(&self, ts: u32) -> Option<u64> {
        audio_time(self.sender_report, self.audio_clock, ts)
    }

    /// One received packet of layer `k` (payload-less padding packets are skipped).
    pub fn push(&mut self, k: usize, data: &[u8], now_ns: u64) {
        let Ok(p) = RtpPacket::parse(data) else {
            self.push_errors += 1;
            return;
        };
        if p.payload().is_empty() {
            return;
        }
        let k = if self.single_stream {
            match Assembler::layer_of_payload(self.asm.ladder(), p.payload()) {
                Some(k) => k,
                None => {
                    self.push_errors += 1;
                    return;
                }
            }
        } else {
            k
        };
        // Arrival of a picture = kernel time of its latest packet (on any layer).
        let ts = p.timestamp();
        match self.arrivals.iter_mut().rev().find(|x| x.0 == ts) {
            Some(x) => {
                x.1 = x.1.min(now_ns);
                x.2 = x.2.max(now_ns);
            }
            None => {
                self.arrivals.push_back((ts, now_ns, now_ns));
                if self.arrivals.len() > 256 {
                    self.arrivals.pop_front();
                }
            }
        }
        if self.asm.push(k, &p).is_err() {
            self.push_errors += 1;
        }
        if let Some(l) = self.lower.as_mut() {
            l.push(k, &p);
        }
        self.release_unrepaired(now_ns);
        // The lower path first: a picture it decodes in this call takes its lateness into
        // the buffer before the top path places the same picture. Placed first, a late base
        // frame (both paths wait for it) was shown late under the old buffer, and the rise
        // came pictures later: a second freeze. Its stand-ins only wait; when a packet
        // completes a picture on both paths, the top version is the one scheduled below and
        // `promote_stand_ins` forgets the stand-in.
        if !self.lower.as_ref().is_some_and(|l| l.active()) {
            self.lower_observed = false;
        }
        while let Some((pic, f)) = self.lower.as_mut().and_then(crate::lower::Lower::next) {
            if !self.show.stands_in(pic.temporal) {
                continue;
            }
            let decoded_ns = (self.now)();
            if !self.lower_observed {
                self.clock.lower_path_starts();
                self.lower_observed = true;
            }
            self.clock.observe(pic.timestamp, decoded_ns);
            if self.newer(pic.timestamp) {
                let (line, frame) = self.entry(&pic, f, decoded_ns, now_ns, true);
                if self.stand_ins.len() >= MAX_STAND_INS {
                    self.stand_ins.pop_front();
                }
                self.stand_ins.push_back(StandIn {
                    ts: pic.timestamp,
                    line,
                    frame,
                });
            }
        }
        while let Some((pic, f)) =
            crate::lower::next_decoded(&mut self.asm, &mut self.dec, &mut self.decoder_errors)
        {
            self.decoded += 1;
            let decoded_ns = (self.now)();
            self.first_decoded_ns.get_or_insert(decoded_ns);
            self.upper_decoded |= pic.top_spatial() > 0;
            // A switch point of the joined layer came: no re-sync needed.
            for w in &mut self.sync_wait[..=(pic.top_spatial() as usize).min(7)] {
                *w = None;
            }
            if !self.show.show(pic.top_spatial(), pic.temporal, decoded_ns) {
                self.hidden += 1;
                continue;
            }
            let lower_active = self.lower.as_ref().is_some_and(|l| l.active());
            if lower_active {
                self.clock.top_decoded(pic.timestamp, decoded_ns);
            }
            if !self.newer(pic.timestamp) {
                // Its stand-in from the lower path was shown.
                continue;
            }
            let (line, frame) = self.entry(&pic, f, decoded_ns, now_ns, false);
            // With a lower path its pictures' lateness sizes the buffer (with the top
            // path's quantile); without, this picture's.
            self.schedule(pic.timestamp, line, frame, decoded_ns, !lower_active, false);
        }
        self.promote_stand_ins((self.now)());
        self.log_base_break();
    }

    /// Says on stderr why the base layer's chain broke (once per break): a break that no
    /// loss explains is a bug to find, and the reason tells it from one a loss does.
    fn log_base_break(&mut self) {
        let Some(b) = self.asm.last_base_break() else {
            return;
        };
        if b.count <= self.base_breaks_logged {
            return;
        }
        self.base_breaks_logged = b.count;
        let since = (self.now)().saturating_sub(self.layers_changed_ns) as f64 / 1e6;
        eprintln!(
            "layercast-player: base layer broken at picture {} ({}, references {:?}); {} layers held, changed {since:.0} ms ago; waiting for a key picture",
            b.picture_id, b.reason, b.refs, self.held
        );
    }

    /// Whether no version of the picture with RTP timestamp `ts` (or of a later one) has been
    /// scheduled for display yet.
    fn newer(&self, ts: u32) -> bool {
        self.newest_scheduled
            .is_none_or(|n| ts.wrapping_sub(n) as i32 > 0)
    }

    /// The slot of the oldest stand-in.
    fn stand_in_due(&self) -> Option<u64> {
        self.slot(self.stand_ins.front()?.ts)
    }

    /// When the picture with RTP timestamp `ts` is due on screen: with sound the pictures
    /// follow the audio clock, else the playout buffer.
    fn slot(&self, ts: u32) -> Option<u64> {
        self.audio_time(ts).or_else(|| self.clock.slot(ts))
    }

    /// Schedules the lower path's pictures whose slot has come while their top version is
    /// not in, and forgets those whose top version (or a later picture) was scheduled. A
    /// stand-in waits for its slot, not its decode: the top path may still deliver the
    /// picture, or an older one, in time.
    fn promote_stand_ins(&mut self, now_ns: u64) {
        while let Some(ts) = self.stand_ins.front().map(|s| s.ts) {
            if !self.newer(ts) {
                self.stand_ins.pop_front();
                continue;
            }
            if self
                .stand_in_due()
                .is_none_or(|t| t + STAND_IN_GRACE_NS > now_ns)
            {
                return;
            }
            let Some(s) = self.stand_ins.pop_front() else {
                return;
            };
            // Ready now (within the grace after its slot: not counted late).
            self.schedule(s.ts, s.line, s.frame, now_ns, false, true);
        }
    }

    /// The frames.jsonl line and the frame-log entry of a decoded picture.
    fn entry(
        &self,
        pic: &codec::depay::AssembledPicture,
        f: codec::vpx::DecodedFrame,
        decoded_ns: u64,
        now_ns: u64,
        lower: bool,
    ) -> (serde_json::Value, crate::framelog::FrameMsg) {
        let ts = pic.timestamp;
        let (first_ns, arrival_ns) = self
            .arrivals
            .iter()
            .rev()
            .find(|x| x.0 == ts)
            .map_or((now_ns, now_ns), |x| (x.1, x.2));
        // `first_arrival_at`: the picture's first packet (on any layer), so that capture to
        // first packet (encode, the sender's queues, the path) and first to last packet (its
        // frames' pacing) can be told apart.
        let line = json!({"decoded_at": now_ns as f64 / 1e9, "picture_id": pic.picture_id,
            "rtp_ts": ts, "width": f.width, "height": f.height,
            "top_spatial": pic.top_spatial(), "temporal": pic.temporal,
            "key": pic.key, "complete": pic.complete, "lower": lower,
            "first_arrival_at": first_ns as f64 / 1e9, "arrival_at": arrival_ns as f64 / 1e9});
        let frame = crate::framelog::FrameMsg {
            arrival_ns,
            decoded_ns,
            layers_held: self.held,
            width: f.width,
            height: f.height,
            i420: Some(f.i420),
        };
        (line, frame)
    }

    /// Puts a picture in the playout buffer, on the audio clock when there is one. `record`:
    /// its lateness sizes the buffer (else it was taken in already, or is not to be).
    fn schedule(
        &mut self,
        ts: u32,
        line: serde_json::Value,
        frame: crate::framelog::FrameMsg,
        decoded_ns: u64,
        record: bool,
        lower: bool,
    ) {
        // Lateness counts from the decode (the earliest it can be shown), not from the
        // packet that completed the picture.
        let prev_due = self.clock.last_due;
        let (mut due, mut late) = match record {
            true => self.clock.due(ts, decoded_ns),
            false => self.clock.place(ts, decoded_ns),
        };
        let mut av = false;
        if let Some(target) = self.audio_time(ts) {
            // The video's own buffer (sized against freezes) wanted this picture later than
            // its sound plays: the audio should move (the host raises its delay).
            if !lower && due > target + AV_FOLLOW_MIN_NS && target + AV_MAX_AHEAD_NS > due {
                self.audio_need_ns = self.audio_need_ns.max(due - target);
            }
            if let (false, Some(sr)) = (lower, self.sender_report) {
                // Its own slot, not `due`: that is kept from going backwards behind the
                // picture before, which was placed on the audio clock, so it would say the
                // video wants the audio's offset less one frame interval, and the delay would
                // come down by only that much per grant.
                let own = self.clock.last_slot;
                if own.abs_diff(target) < AV_MAX_AHEAD_NS {
                    let want = own as i64 - sr.capture_of(ts) as i64;
                    self.audio_floor_ns = Some(self.audio_floor_ns.map_or(want, |f| f.max(want)));
                }
            }
            if target + AV_LATE_DROP_NS < decoded_ns && self.av_late_run < AV_LATE_DROP_MAX_RUN {
                // Its sound has played: showing it now would be out of sync. Dropped, unless
                // pictures have been this late for a second (a player that cannot keep up
                // shows late video, not none).
                self.av_late_run += 1;
                self.av_late_dropped += 1;
                self.clock.last_due = prev_due;
                return;
            }
            if target <= decoded_ns + AV_MAX_AHEAD_NS {
                // Display times never go backwards.
                due = target.max(decoded_ns).max(prev_due);
                late = target < decoded_ns;
                self.clock.last_due = due;
                self.on_audio_clock += 1;
                av = true;
                self.av_late_run = 0;
            }
        }
        self.newest_scheduled = Some(ts);
        self.late_frames += (late && !lower) as u64;
        // Keep display order by due time (pictures arrive in order; be safe).
        let pos = self.playout.partition_point(|x| x.due <= due);
        self.playout.insert(
            pos,
            Pending {
                due,
                av,
                lower,
                line,
                frame,
            },
        );
    }

    /// Shows the frames whose display time has come: counts them, detects freezes (the W3C
    /// rule, [`crate::freeze`]) and writes the per-frame log.
    pub fn tick(&mut self, now_ns: u64) {
        self.promote_stand_ins(now_ns);
        while self.playout.front().is_some_and(|f| f.due <= now_ns) {
            let Some(Pending {
                due,
                lower,
                mut line,
                frame,
                ..
            }) = self.playout.pop_front()
            else {
                break;
            };
            let (w, h) = (frame.width, frame.height);
            self.first_shown_ns.get_or_insert(now_ns);
            self.frames += 1;
            self.shown_lower += lower as u64;
            self.frames_1s += 1;
            self.width = w;
            self.height = h;
            if let Some(prev) = self.last_frame_ns {
                if self.freeze.gap(due.saturating_sub(prev) as f64 / 1e9) {
                    self.freezes += 1;
                }
            }
            self.last_frame_ns = Some(due);
            line["t"] = json!(due as f64 / 1e9);
            if let Some(l) = self.log.as_mut() {
                let _ = writeln!(l, "{line}");
            }
            if let (Some(win), Some(p)) = (self.window.as_mut(), frame.i420.as_ref()) {
                win.show(p, w, h);
            }
            if let Some(fl) = &mut self.framelog {
                fl.push(frame, now_ns);
            }
        }
    }

    /// Once a second: the window's overlay text.
    pub fn overlay(&mut self, text: &str) {
        if let Some(w) = self.window.as_mut() {
            w.set_text(text);
        }
    }

    /// The frame log's counters (rows, QR codes read, pictures stripped, write errors,
    /// latest glass-to-glass latency ms).
    pub fn framelog_json(&self) -> serde_json::Value {
        use std::sync::atomic::Ordering::Relaxed;
        match &self.framelog {
            None => serde_json::Value::Null,
            Some(f) => json!({"rows": f.stats.rows.load(Relaxed),
                "qr_read": f.stats.qr_read.load(Relaxed),
                "stripped": f.stats.stripped.load(Relaxed),
                "write_errors": f.stats.write_errors.load(Relaxed),
                "latency_ms": f.stats.last_latency_ns.load(Relaxed) as f64 / 1e6}),
        }
    }

    /// What the playout buffer holds above the fastest recent picture now, ms.
    pub fn playout_jitter_ms(&self) -> f64 {
        self.clock.jitter_ns() as f64 / 1e6
    }

    /// The buffer's two terms now, ms (`PlayoutClock::terms_ns`): all pictures' (the lower
    /// path's) and the top path's quantile.
    pub fn playout_terms_ms(&self) -> (f64, f64) {
        let (a, b) = self.clock.terms_ns();
        (a as f64 / 1e6, b as f64 / 1e6)
    }

    /// When the next frame is due, ns.
    pub fn next_due(&self) -> Option<u64> {
        let shown = self.playout.front().map(|f| f.due);
        let stand_in = self.stand_in_due().map(|t| t + STAND_IN_GRACE_NS);
        match (shown, stand_in) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Decoder errors on the lower path.
    pub fn lower_decoder_errors(&self) -> u64 {
        self.lower.as_ref().map_or(0, |l| l.decoder_errors)
    }

    /// See [`Assembler::base_broken`].
    pub fn base_broken(&self) -> bool {
        self.asm.base_broken()
    }

    pub fn stats(&self) -> AssemblerStats {
        self.asm.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steady spatial layer per subscription of L3T3 (layers in spatial-major order).
    #[test]
    fn steady_spatial_layer_per_subscription() {
        let ladder =
            LayerLadder::spatial_major(&[vec![45, 15, 15], vec![120, 40, 40], vec![300, 100, 100]])
                .unwrap();
        // k: 0..=2 spatial 0; 3 = (1,0) only TL0 at spatial 1 (1/4 of the pictures): 0;
        // 4 = (1,1): half: 1; 5 = (1,2): 1; 6 = (2,0): 1; 7, 8: 2.
        let got: Vec<u8> = (0..9).map(|k| ladder.steady_spatial(k)).collect();
        assert_eq!(got, vec![0, 0, 0, 0, 1, 1, 1, 2, 2]);
        // Size-first: k 2 = (1,0) over (0,0), (0,1): 0; 3 = (1,1): 1; 4 = (0,2), 5 = (1,2),
        // 6 = (2,0): 1; 7, 8: 2.
        let sf = LayerLadder::ordered(
            &[vec![45, 15, 15], vec![120, 40, 40], vec![300, 100, 100]],
            codec::ladder::LayerOrder::SizeFirst,
        )
        .unwrap();
        let got: Vec<u8> = (0..9).map(|k| sf.steady_spatial(k)).collect();
        assert_eq!(got, vec![0, 0, 0, 1, 1, 1, 1, 2, 2]);
        let l1t2 = LayerLadder::spatial_major(&[vec![100, 50]]).unwrap();
        assert_eq!(l1t2.steady_spatial(0), 0);
        let l2t2 = LayerLadder::spatial_major(&[vec![100, 50], vec![200, 100]]).unwrap();
        // (1,0) alone is half the pictures at spatial 1.
        assert_eq!(l2t2.steady_spatial(2), 1);
    }

    /// Five layers of L3T3: the 0212 pattern gives 320x180 (top spatial 1) TL0/TL1
    /// pictures and 160x90 TL2 pictures; only the 320x180 ones are shown once they flow,
    /// lower ones when the upper layer stalls, and a TL0/TL1 picture that arrives without
    /// its spatial-1 frame (late or lost) is shown at 160x90 rather than left out.
    #[test]
    fn only_steady_layer_pictures_are_shown() {
        let ladder =
            LayerLadder::spatial_major(&[vec![45, 15, 15], vec![120, 40, 40], vec![300, 100, 100]])
                .unwrap();
        let ms = 1_000_000u64;
        let mut f = ShowFilter::default();
        f.set_top(&ladder, Some(4));
        // Just joined spatial 1 (waiting for its sync): spatial-0 pictures are shown.
        assert!(f.show(0, 2, 0));
        assert!(f.show(0, 2, 67 * ms));
        // Spatial 1 flows: TL2 pictures (spatial 0 only) are hidden.
        let mut t = 134 * ms;
        let mut shown = Vec::new();
        for i in 0..16 {
            let (top, tid) = if i % 2 == 1 {
                (0, 2)
            } else {
                (1, (i / 2 % 2) as u8)
            };
            shown.push(f.show(top, tid, t));
            t += 67 * ms;
        }
        assert_eq!(shown, (0..16).map(|i| i % 2 == 0).collect::<Vec<_>>());
        // A TL0 picture without its spatial-1 frame: shown (the layer below, scaled).
        assert!(f.show(0, 0, t));
        // Spatial 1 stops (packets lost) after the picture at `last`: for 0.5 s the TL2
        // pictures stay hidden, then they are shown again.
        let last = t - 2 * 67 * ms;
        while t <= last + 480 * ms {
            assert!(!f.show(0, 2, t));
            t += 20 * ms;
        }
        t = last + 520 * ms;
        assert!(f.show(0, 2, t));
        // Down to 4 layers: spatial 1 at 1/4 of the rate is not steady, everything shows.
        f.set_top(&ladder, Some(3));
        assert!(f.show(1, 0, t + 67 * ms));
        assert!(f.show(0, 2, t + 134 * ms));
    }
}

#[cfg(test)]
mod av_clock;
#[cfg(test)]
mod lower_path;
