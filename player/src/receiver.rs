//! The receive loop: a shell around the sans-IO [`Subscriber`] (crates/session). Sockets in
//! (kernel timestamps, IGMP/SSM joins), announcements and keys from the poller thread in, the
//! Subscriber's outputs out: joins and leaves open and close sockets, transmits go out of the
//! feedback socket, media goes to the video path, events become the per-second log line,
//! telemetry and metrics.

use crate::error::{Error, Result};
use crate::feedback::Feedback;
use crate::net::{self, McastSocket};
use crate::poller::{self, Event as PollEvent};
use crate::telemetry::{self, Telemetry, MAX_DECISIONS_PER_REPORT};
use crate::Args;
use congestion::{LayeredController, Time};
use serde_json::{json, Value};
use session::audio::AudioOutput;
use session::subscriber::{
    Announcement, Control, Endpoint, Event, Output, Security, Snapshot, SubscriberConfig,
    TransmitKind,
};
use session::Subscriber;
use std::io::Write;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Per-second ticks between two [`trim_heap`] calls.
const TRIM_EVERY_TICKS: u64 = 10;
/// At most one raise of the audio's delay per this long: the video's buffer settles over a
/// few pictures after a rise, and every raise is an audible pause.
const AUDIO_RAISE_EVERY: Duration = Duration::from_secs(2);
/// Added to what the video asked for, so the next picture a little later does not ask again.
const AUDIO_RAISE_MARGIN: Duration = Duration::from_millis(20);
/// The audio's delay is never raised above this (the previous fixed default was 800 ms).
const AUDIO_DELAY_MAX: Duration = Duration::from_millis(1500);
/// How often the audio may be granted a lower delay: the video's pictures of this long say
/// how early the audio clock may run.
const AUDIO_LOWER_EVERY: Duration = Duration::from_secs(2);
/// Kept above the latest picture's own display time when the audio's delay comes down: twice
/// the 20 ms past which a picture asks for a raise, so that lowering and raising do not take
/// turns.
const AUDIO_LOWER_MARGIN: Duration = Duration::from_millis(40);

/// Gives the allocator's free pages back to the kernel (glibc: `malloc_trim(0)`). The live
/// heap is small and bounded, but its per-second churn leaves free holes between long-lived
/// blocks that glibc keeps resident (docs/reliability.md "Soak"); a trim every 10 s costs
/// microseconds on a heap this size.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; no pointer is passed.
    unsafe {
        libc::malloc_trim(0);
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

fn now() -> Time {
    Time(net::realtime_ns())
}

/// Everything the loop owns besides the Subscriber.
struct Shell {
    a: Args,
    protocol: String,
    socks: Vec<(Endpoint, McastSocket)>,
    ann_sock: Option<McastSocket>,
    feedback: Feedback,
    decoder: crate::decode::Decoder,
    log: Option<std::fs::File>,
    telemetry: Option<Telemetry>,
    metrics_text: Arc<Mutex<String>>,
    refresh_security: Arc<AtomicBool>,
    decisions: Vec<Value>,
    first_join_ns: Option<u64>,
    start_wall: Instant,
    ticks: u64,
    exit: bool,
    buf: Vec<u8>,
    /// The audio track's decoder and outputs (`crate::audio`; the track itself is the
    /// Subscriber's) and the RTCP sockets, held with layer 0 (`crate::audio_net`); the
    /// description in force and the SSM source the RTCP sockets use; layer 0's sender report
    /// (the video's RTP <-> capture mapping) and what the decoder thread last got of it.
    audio: Option<crate::audio::Audio>,
    rtcp: crate::audio_net::RtcpNet,
    info: Option<proto::SessionInfo>,
    ssm: Option<Ipv4Addr>,
    video_sr: Option<crate::audio::SrMap>,
    /// When the audio's delay was last raised for the video (realtime ns).
    audio_raised_ns: Option<u64>,
    /// When the audio was last granted a lower delay (or the video's floor last taken).
    audio_lowered_ns: u64,
    av_sent: (
        Option<crate::audio::SrMap>,
        Option<crate::audio::AudioClock>,
    ),
}

pub fn run(a: Args, signalled: &AtomicBool) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ev_tx, ev_rx) = mpsc::channel::<PollEvent>();
    let mut threads = Vec::new();
    let refresh_security = Arc::new(AtomicBool::new(false));
    let is_tfmcc = a.fixed_layers.is_none() && a.controller.eq_ignore_ascii_case("tfmcc");
    // A TFMCC player's receiver id, known before the description is fetched: an
    // `auth_reports` session hands out the report key of exactly this id.
    let rid = is_tfmcc.then(|| crate::feedback::random_rid(&a.viewer_id));
    if let Some(url) = a.session_url.clone() {
        // Every player has a receiver id: its UDP report key is issued for it.
        let rid = Some(rid.unwrap_or_else(|| crate::feedback::random_rid(&a.viewer_id)));
        let (tx, st, rf) = (ev_tx.clone(), stop.clone(), refresh_security.clone());
        let every = Duration::from_millis(a.poll_interval_ms.max(50));
        let binding = crate::auth::new_binding()?;
        threads.push(std::thread::spawn(move || {
            poller::run(url, every, tx, st, rf, rid, binding)
        }));
    }
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
    let log = match &a.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {dir:?}"), e))?;
            let p = dir.join("player.jsonl");
            Some(std::fs::File::create(&p).map_err(|e| Error::io(format!("creating {p:?}"), e))?)
        }
        None => None,
    };
    let control = match (a.fixed_layers, rid) {
        (Some(n), _) => Control::Fixed(n),
        (None, Some(rid)) => Control::Tfmcc { rid },
        (None, None) => Control::Layered(live_controller(&a.controller)?),
    };
    let pinned_sam = match &a.sam_key {
        Some(k) => Some(security::auth::SamVerifier::from_published(k)?),
        None => None,
    };
    let cfg = SubscriberConfig {
        deliver_media: true,
        // With a session URL, multicast SAMs wait for the description.
        await_security: a
            .session_url
            .as_deref()
            .and_then(crate::auth::description_url)
            .is_some(),
        pinned_sam,
        ssm: a.ssm,
        ssm_any: a.ssm_any,
        feedback_override: a.tfmcc_feedback,
        feedback_fallback_host: a
            .session_url
            .as_deref()
            .and_then(|u| crate::http_client::split_url(u).ok())
            .and_then(|(h, _)| h.parse::<std::net::SocketAddrV4>().ok())
            .map(|sa| *sa.ip()),
        media_requests: true,
        retransmission: !a.no_retransmission,
        audio_delay: Duration::from_millis(
            a.playout_delay_ms.unwrap_or(crate::audio::DEFAULT_DELAY_MS),
        ),
    };
    let mut sub = Subscriber::new(control, cfg);
    // A description handed over at start is the first announcement: the base layer is joined
    // in the first turn of the loop, not one announcement interval later (plm/E3).
    if let Some(i) = a.session_info.clone() {
        sub.handle_announcement(now(), Announcement::Info(i));
    }
    let mut sh = Shell {
        protocol: match a.fixed_layers {
            Some(n) => format!("fixed:{n}"),
            None => a.controller.clone(),
        },
        socks: Vec::new(),
        ann_sock: match a.announce {
            Some(sa) => Some(McastSocket::open(*sa.ip(), sa.port(), a.interface, true)?),
            None => None,
        },
        feedback: Feedback::new(a.interface)?,
        decoder: crate::decode::Decoder::start(a.clone()),
        log,
        telemetry: a.telemetry_url.clone().map(Telemetry::new),
        metrics_text,
        refresh_security,
        decisions: Vec::new(),
        first_join_ns: None,
        start_wall: Instant::now(),
        ticks: 0,
        exit: false,
        buf: vec![0u8; 2048],
        audio: None,
        rtcp: crate::audio_net::RtcpNet::default(),
        info: None,
        ssm: a.ssm,
        video_sr: None,
        audio_raised_ns: None,
        audio_lowered_ns: 0,
        av_sent: (None, None),
        a,
    };
    loop {
        if signalled.load(Ordering::SeqCst) || sh.exit {
            break;
        }
        if sh
            .a
            .duration
            .is_some_and(|d| sh.start_wall.elapsed().as_secs_f64() >= d)
        {
            break;
        }
        while let Ok(ev) = ev_rx.try_recv() {
            match ev {
                PollEvent::Announcement(body) => {
                    sub.handle_announcement(now(), Announcement::Json(&body))
                }
                PollEvent::Security(sec) => sh.security(&mut sub, *sec),
                // The Subscriber opens every track's datagrams (audio included): it takes them.
                PollEvent::MediaKeys(o) => sub.handle_media_keys(now(), *o),
            }
        }
        let deadline = sh.outputs(&mut sub);
        sh.wait_and_read(&mut sub, deadline);
        sh.video_turn(&mut sub);
        sh.audio_turn(&mut sub);
        if now() >= deadline {
            sub.handle_timeout(now());
        }
    }
    // A clean leave: TFMCC's leave report (RFC 4654 §3.3, so that the sender replaces a
    // leaving CLR at once), then every membership dropped.
    sub.close(now());
    sh.outputs(&mut sub);
    sh.socks.clear();
    let (start_wall, mut log) = (sh.start_wall, sh.log.take());
    let mut video = sh.decoder.finish();
    if let Some(f) = log.as_mut() {
        let (packets, lost) = sub.totals();
        let _ = writeln!(
            f,
            "{}",
            json!({"event": "exit", "elapsed_s": start_wall.elapsed().as_secs_f64(),
            "packets_received": packets, "packets_lost": lost, "fec": sub.fec_stats(),
            "rtx": sub.rtx_stats(),
            "video": video.as_mut().map(crate::decode::totals)})
        );
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

impl Shell {
    fn security(&mut self, sub: &mut Subscriber, sec: crate::auth::SessionSecurity) {
        eprintln!(
            "layercast-player: SAM key {}, media {}, {}",
            if sec.sam.is_some() || self.a.sam_key.is_some() {
                "pinned"
            } else {
                "none"
            },
            if sec.opener.is_some() {
                "encrypted"
            } else {
                "in the clear"
            },
            sec.ssm
                .filter(|_| self.a.ssm.is_none() && !self.a.ssm_any)
                .or(self.a.ssm)
                .map_or("any-source joins".to_string(), |s| format!("SSM from {s}"))
        );
        if let Some(t) = &self.telemetry {
            t.set_udp(crate::report::sender_for(&self.a, sec.telemetry));
        }
        if self.a.ssm.is_none() && !self.a.ssm_any {
            self.ssm = sec.ssm;
        }
        sub.handle_security(
            now(),
            Security {
                sam: sec.sam,
                opener: sec.opener,
                ssm: sec.ssm,
                report_key: sec.report_key,
            },
        );
    }

    /// Carries out the Subscriber's outputs; returns its next deadline.
    fn outputs(&mut self, sub: &mut Subscriber) -> Time {
        loop {
            match sub.poll_output() {
                Output::Timeout(t, _) => return t,
                Output::Join(e) => {
                    match McastSocket::open_from(e.group, e.port, self.a.interface, e.source) {
                        Ok(s) => {
                            self.socks.push((e, s));
                            self.first_join_ns.get_or_insert_with(net::realtime_ns);
                        }
                        Err(err) => eprintln!("layercast-player: join layer {}: {err}", e.layer),
                    }
                    self.layers_changed();
                }
                Output::Leave(e) => {
                    // Dropping the socket drops the membership (the IGMP leave).
                    self.socks
                        .retain(|(x, _)| (x.group, x.port) != (e.group, e.port));
                    self.layers_changed();
                }
                Output::Transmit(t) => {
                    if matches!(t.kind, TransmitKind::KeyRequest | TransmitKind::Resync(_)) {
                        self.decoder.send(crate::decode::Cmd::KeyRequest);
                    }
                    self.feedback.send(&t);
                }
                Output::Audio(AudioOutput::Play(f)) => {
                    if let Some(a) = self.audio.as_mut() {
                        let played = a.play(&f);
                        if !played.ok {
                            sub.audio_decode_failed(&f);
                        }
                        sub.audio_shortened(played.cut);
                    }
                }
                Output::Audio(AudioOutput::Refused { recv_ns, why }) => {
                    if let Some(a) = self.audio.as_mut() {
                        a.refused(recv_ns, why);
                    }
                }
                Output::Media(m) => {
                    self.decoder
                        .packet(m.layer as usize, m.packet, m.recv_time.as_nanos())
                }
                Output::Event(Event::SessionChanged { info, .. }) => {
                    eprintln!(
                        "layercast-player: session {} ({} layers, {} B packets, bunch {})",
                        info.session_id,
                        info.layers.len(),
                        info.packet_size,
                        info.bunch_len
                    );
                    self.rtcp.reset();
                    self.video_sr = None;
                    self.audio = info.track(proto::TrackKind::Audio).and_then(|t| {
                        let o = crate::audio::AudioOptions {
                            out: self.a.out.as_deref(),
                            speaker: self.a.window,
                        };
                        crate::audio::Audio::new(t, &o, self.audio.take())
                    });
                    self.info = Some((*info).clone());
                    self.decoder.send(crate::decode::Cmd::Session(info));
                    self.layers_changed();
                }
                Output::Event(Event::Decision(d)) => {
                    // Bounded: a second's decisions (a controller decides a few times per
                    // second at most; the cap only guards a misbehaving one).
                    if self.decisions.len() < MAX_DECISIONS_PER_REPORT {
                        self.decisions.push(telemetry::decision_json(&d));
                    }
                }
                Output::Event(Event::Stats(s)) => self.report(&s),
                Output::Event(Event::RefreshSecurity) => {
                    self.refresh_security.store(true, Ordering::Relaxed)
                }
                Output::Event(Event::Exit) => self.exit = true,
            }
        }
    }

    /// Layers with an open socket.
    fn held(&self) -> usize {
        let mut l: Vec<u8> = self.socks.iter().map(|(e, _)| e.layer).collect();
        l.sort_unstable();
        l.dedup();
        l.len()
    }

    fn layers_changed(&mut self) {
        self.decoder.send(crate::decode::Cmd::Layers(self.held()));
    }

    /// Waits for packets, the deadline, the next video frame or 50 ms; then drains every
    /// readable socket into the Subscriber.
    fn wait_and_read(&mut self, sub: &mut Subscriber, deadline: Time) {
        let mut fds: Vec<i32> = Vec::new();
        if let Some(s) = &self.ann_sock {
            fds.push(s.raw_fd());
        }
        fds.extend(self.socks.iter().map(|(_, s)| s.raw_fd()));
        let n_media = fds.len();
        fds.extend(self.rtcp.fds());
        let fb_index = fds.len();
        fds.push(self.feedback.raw_fd());
        let now_ns = net::realtime_ns() as i64;
        let ms = |t: i64| ((t - now_ns) / 1_000_000).max(0);
        let wait_ms = ms(deadline.as_nanos().min(i64::MAX as u64) as i64).min(50);
        let ann = self.ann_sock.is_some();
        for i in net::poll_readable(&fds, wait_ms as i32) {
            if i == fb_index {
                for _ in 0..256 {
                    let Some(n) = self.feedback.recv(&mut self.buf) else {
                        break;
                    };
                    sub.handle_retransmission(now(), now(), &self.buf[..n]);
                }
                continue;
            }
            if i >= n_media {
                let vssrc = self
                    .info
                    .as_ref()
                    .and_then(|i| i.track(proto::TrackKind::Video))
                    .and_then(|t| t.streams.first())
                    .map(|s| s.ssrc);
                self.rtcp.drain(
                    i - n_media,
                    &mut self.buf,
                    sub,
                    self.audio.as_mut(),
                    &mut self.video_sr,
                    vssrc,
                );
                continue;
            }
            if ann && i == 0 {
                let Some(s) = &self.ann_sock else { continue };
                for _ in 0..crate::auth::SAMS_PER_TURN {
                    let Ok(Some((n, _ts, trunc))) = s.recv(&mut self.buf) else {
                        break;
                    };
                    if trunc {
                        sub.handle_truncated_sam();
                    } else {
                        sub.handle_announcement(now(), Announcement::Sam(&self.buf[..n]));
                    }
                }
                continue;
            }
            let Some((e, s)) = self.socks.get(i - usize::from(ann)) else {
                continue;
            };
            for _ in 0..256 {
                let Ok(Some((n, ts, trunc))) = s.recv(&mut self.buf) else {
                    break;
                };
                if trunc {
                    sub.handle_truncated();
                } else {
                    sub.handle_datagram(now(), e.group, e.port, Time(ts), &self.buf[..n]);
                }
            }
        }
    }

    /// The video path's part of a turn: key and re-sync requests.
    fn video_turn(&mut self, sub: &mut Subscriber) {
        let sh = &self.decoder.shared;
        // Key pictures are asked for while nothing has been decoded (join) and while the base
        // layer's chain is broken by an unrepaired loss (the Subscriber paces the requests:
        // one per `KEY_REQUEST_RETRY`; the server aggregates them, docs/server.md).
        sub.set_awaiting_key(
            sh.active.load(Ordering::Relaxed)
                && (!sh.decoded.load(Ordering::Relaxed) || sh.base_broken.load(Ordering::Relaxed)),
        );
        let sync = sh.sync_request.swap(0, Ordering::Relaxed);
        for s in 1..8 {
            if sync & (1 << s) != 0 {
                sub.request_resync(now(), s);
            }
        }
    }

    /// Every `AUDIO_LOWER_EVERY`: when every picture of that time would have been shown on
    /// the video's own buffer with the audio clock earlier, the audio is granted that much
    /// lower a delay less `AUDIO_LOWER_MARGIN` (it comes down by cutting its frames short, as
    /// far as its own packets allow: `Subscriber::lower_audio_delay`).
    fn lower_audio(&mut self, sub: &mut Subscriber, clock: Option<crate::audio::AudioClock>) {
        if clock.is_none() {
            return;
        }
        let t = crate::net::realtime_ns();
        if t.saturating_sub(self.audio_lowered_ns) < AUDIO_LOWER_EVERY.as_nanos() as u64 {
            return;
        }
        self.audio_lowered_ns = t;
        let floor = self
            .decoder
            .shared
            .audio_floor_ns
            .swap(i64::MIN, Ordering::Relaxed);
        let Some(c) = clock.filter(|_| floor != i64::MIN) else {
            return;
        };
        let room = c.offset_ns - floor - AUDIO_LOWER_MARGIN.as_nanos() as i64;
        if room > AUDIO_RAISE_MARGIN.as_nanos() as i64 {
            sub.lower_audio_delay(Duration::from_nanos(room as u64));
        }
    }

    /// The audio's part of a turn: the RTCP sockets follow layer 0, and the video's pictures
    /// are scheduled against the audio clock (the decoder thread gets the mapping when it
    /// changes).
    fn audio_turn(&mut self, sub: &mut Subscriber) {
        let base_held = self.socks.iter().any(|(e, _)| e.layer == 0);
        self.rtcp
            .sync(base_held, self.info.as_ref(), self.a.interface, self.ssm);
        // The video's own buffer wants more delay than the audio gives: raise the audio's
        // delay (one pause) at most once per `AUDIO_RAISE_EVERY`, never above
        // `AUDIO_DELAY_MAX` (docs/protocols/audio.md "Playout delay").
        let need = self.decoder.shared.audio_need_ns.swap(0, Ordering::Relaxed);
        let t = (need > 0).then(crate::net::realtime_ns).unwrap_or(0);
        if need > 0
            && self
                .audio_raised_ns
                .is_none_or(|r| t.saturating_sub(r) >= AUDIO_RAISE_EVERY.as_nanos() as u64)
        {
            if let Some(d) = sub.audio_delay() {
                let by = (Duration::from_nanos(need) + AUDIO_RAISE_MARGIN)
                    .min(AUDIO_DELAY_MAX.saturating_sub(d));
                if !by.is_zero() {
                    sub.delay_audio(by);
                    self.audio_raised_ns = Some(t);
                }
            }
        }
        let anchor = sub.audio().and_then(|t| t.anchor());
        if let Some(x) = self.audio.as_mut() {
            if sub.take_audio_new_instance() {
                x.forget_sender_report();
            }
        }
        let clock = self.audio.as_ref().and_then(|x| x.clock(anchor));
        self.lower_audio(sub, clock);
        let av = (self.video_sr, clock);
        if av != self.av_sent {
            self.av_sent = av;
            self.decoder.send(crate::decode::Cmd::AvSync {
                sender_report: av.0,
                audio_clock: av.1,
            });
        }
    }

    /// Once a second: the log line, telemetry and metrics.
    fn report(&mut self, s: &Snapshot) {
        self.ticks += 1;
        if self.ticks.is_multiple_of(TRIM_EVERY_TICKS) {
            trim_heap();
        }
        let dt = s.interval_s;
        let decisions = std::mem::take(&mut self.decisions);
        let tf = s.tfmcc.as_ref().map(|t| {
            let mut j = serde_json::to_value(t).unwrap_or_default();
            j["feedback_sent"] = json!(self.feedback.sent);
            j["feedback_errors"] = json!(self.feedback.errors + s.feedback_no_address);
            j
        });
        let (n_layers, max_layers) = (s.layers, s.max_layers);
        let video = self.decoder.report(
            dt,
            self.first_join_ns,
            format!(
                "layers {n_layers}/{max_layers}\nrate {:.0} kbit/s  loss {:.2} %\nestimate {}{}",
                s.rate_bps / 1e3,
                100.0 * s.loss_ratio,
                s.estimate_bps
                    .map_or("-".into(), |e| format!("{:.0} kbit/s", e / 1e3)),
                self.audio.as_ref().map_or(String::new(), |x| format!(
                    "\naudio {:.0} dBFS  concealed {}",
                    x.level_db().max(-99.0),
                    s.audio.map_or(0, |a| a.playout.concealed)
                ))
            ),
            Duration::from_millis(100),
        );
        let line = json!({
            "t": s.at.as_secs_f64(),
            "elapsed_s": self.start_wall.elapsed().as_secs_f64(),
            "cpu_s": net::process_cpu_s(),
            "session_id": s.session_id,
            "protocol": self.protocol,
            "layers": n_layers, "sockets": self.held(), "max_layers": max_layers,
            "subscribed_bps": s.subscribed_bps, "rate_bps": s.rate_bps,
            "estimate_bps": s.estimate_bps, "loss_ratio": s.loss_ratio,
            "loss_ratio_1s": s.loss_ratio_1s,
            "packets_received": s.packets_received, "packets_lost": s.packets_lost,
            "packets_1s": s.packets_1s, "lost_1s": s.lost_1s,
            "pp_samples": s.pp_samples, "pp_gap_us_median": s.pp_gap_us_median,
            "pp_bps_median_payload": s.pp_bps_median_payload,
            "join_to_first_packet_ms": s.join_to_first_packet_ms,
            "max_gap_ms": s.max_gap_ms,
            "decisions": decisions,
            "tfmcc": tf,
            "video": video,
            "audio": self.audio.as_mut().map(|x| {
                x.flush();
                x.json(&s.audio.unwrap_or_default())
            }),
            "fec": s.fec,
            "rtx": s.rtx,
            "stale_resets": s.stale_resets,
            "restart": s.restart,
            "dropped": s.drops,
            "security": {"sam": telemetry::sam_json(s.sam.as_ref()), "encrypted": s.encrypted,
                "ssm_source": s.ssm_source.map(|a: Ipv4Addr| a.to_string()),
                "opened": s.opened},
        });
        if let Some(f) = self.log.as_mut() {
            let _ = writeln!(f, "{line}");
            let _ = f.flush();
        }
        if !self.a.headless {
            eprintln!(
                "layers {n_layers}/{max_layers} rate {:.0} kbit/s est {} loss {:.3}",
                s.rate_bps / 1e3,
                s.estimate_bps
                    .map(|e| format!("{:.0} kbit/s", e / 1e3))
                    .unwrap_or("-".into()),
                s.loss_ratio
            );
        }
        if let (Some(t), Some(sid)) = (&self.telemetry, &self.a.session_name) {
            let v = &line["video"];
            t.send(json!({
                "viewer_id": self.a.viewer_id, "session_id": sid, "protocol": self.protocol,
                "layers": n_layers, "max_layers": max_layers, "rate_bps": s.rate_bps,
                "estimate_bps": s.estimate_bps, "loss_ratio": s.loss_ratio.clamp(0.0, 1.0),
                "packets_received": s.packets_received, "packets_lost": s.packets_lost,
                "width": v["width"].as_u64().unwrap_or(0),
                "height": v["height"].as_u64().unwrap_or(0),
                "fps": v["frames_1s"].as_f64().unwrap_or(0.0) / dt,
                "frames": v["frames"].as_u64().unwrap_or(0),
                "freezes": v["freezes"].as_u64().unwrap_or(0),
                "rtt_s": s.rtt_s,
                "audio_packets": s.audio.map_or(0, |x| x.playout.packets),
                "audio_lost": s.audio.map_or(0, |x| x.playout.lost),
                "audio_concealed": s.audio.map_or(0, |x| x.playout.concealed),
                "decisions": line["decisions"],
                "tfmcc": line["tfmcc"],
            }));
        }
        if self.a.metrics_addr.is_some() {
            let mut m = telemetry::metrics(
                &self.a.viewer_id,
                s,
                line["tfmcc"].as_object().map(|_| &line["tfmcc"]),
            );
            if let (Some(_), Some(st)) = (self.audio.as_ref(), s.audio.as_ref()) {
                m.push_str(&crate::audio::Audio::metrics(
                    st,
                    &format!("{{viewer=\"{}\"}}", self.a.viewer_id),
                ));
            }
            if let Ok(mut t) = self.metrics_text.lock() {
                *t = m;
            }
        }
    }
}
