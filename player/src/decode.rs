//! The video path on a worker thread of its own, behind a bounded queue: the receive loop only
//! measures and decides (kernel timestamps, the Subscriber), and a slow decode (a key picture,
//! a loaded machine) no longer holds up reading the sockets. When the queue is full the packet
//! is dropped and counted (`video.queue_dropped`): the decoder cannot keep up, and the
//! assembler treats the gap as loss.
//!
//! The loop talks to it with [`Cmd`]s; what the loop needs back each turn (anything decoded
//! yet, a re-sync to ask for) comes through atomics, the per-second counters through a
//! request answered on a channel.

use crate::video::Video;
use crate::Args;
use proto::SessionInfo;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Packets the queue holds (about 1.5 s of a 10-Mbit/s session of 1200-B packets).
pub const QUEUE_PACKETS: usize = 1536;

/// What the receive loop asks of the worker.
pub enum Cmd {
    /// A new session: a new video path (the previous one's logs and window carry on).
    Session(Box<SessionInfo>),
    /// The number of layers held.
    Layers(usize),
    /// One media packet of layer `k` received at kernel time `ns`.
    Packet {
        layer: usize,
        data: Vec<u8>,
        ns: u64,
    },
    /// A key-picture or re-sync request went out (counted in `video.key_requests`).
    KeyRequest,
    /// Lip sync (issue 21): layer 0's sender report (the video's RTP <-> capture mapping)
    /// and the audio clock, the master the pictures are scheduled against.
    AvSync {
        sender_report: Option<crate::audio::SrMap>,
        audio_clock: Option<crate::audio::AudioClock>,
    },
    /// The per-second counters, with the overlay's receive-side text.
    Report {
        dt: f64,
        first_join_ns: Option<u64>,
        overlay: String,
        reply: SyncSender<Value>,
    },
}

/// What the loop reads back without waiting.
#[derive(Default)]
pub struct Shared {
    /// The current video path has decoded a picture.
    pub decoded: AtomicBool,
    /// A video path exists.
    pub active: AtomicBool,
    /// The base layer's chain is broken (an unrepaired TL0 loss) until a key picture comes:
    /// key pictures are asked for (`codec::depay::Assembler::base_broken`).
    pub base_broken: AtomicBool,
    /// Spatial layers to ask a re-sync of (bit s).
    pub sync_request: AtomicU8,
    /// Packets dropped because the queue was full.
    pub queue_dropped: AtomicU64,
    /// How much more delay the video wants than the audio clock gives, ns (the largest since
    /// the receiver last took it; `Video::take_audio_need`).
    pub audio_need_ns: AtomicU64,
    /// The smallest audio clock offset the video's own buffer allows, ns (the largest of the
    /// pictures since the receiver last took it, `i64::MIN`: none;
    /// `Video::take_audio_floor`).
    pub audio_floor_ns: AtomicI64,
}

/// The worker's handle.
pub struct Decoder {
    tx: SyncSender<Cmd>,
    pub shared: Arc<Shared>,
    thread: Option<JoinHandle<Option<Video>>>,
}

impl Decoder {
    pub fn start(args: Args) -> Decoder {
        let (tx, rx) = mpsc::sync_channel(QUEUE_PACKETS);
        let shared = Arc::new(Shared {
            audio_floor_ns: AtomicI64::new(i64::MIN),
            ..Shared::default()
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("decoder".into())
            .spawn(move || worker(args, rx, sh))
            .ok();
        Decoder { tx, shared, thread }
    }

    /// Control commands wait for room (they are rare and must not be lost).
    pub fn send(&self, c: Cmd) {
        let _ = self.tx.send(c);
    }

    /// A media packet: dropped (and counted) when the queue is full.
    pub fn packet(&self, layer: usize, data: Vec<u8>, ns: u64) {
        if let Err(mpsc::TrySendError::Full(_)) = self.tx.try_send(Cmd::Packet { layer, data, ns })
        {
            self.shared.queue_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The per-second video JSON (`None` without a video path, or when the worker is more
    /// than `wait` behind).
    pub fn report(
        &self,
        dt: f64,
        first_join_ns: Option<u64>,
        overlay: String,
        wait: Duration,
    ) -> Option<Value> {
        if !self.shared.active.load(Ordering::Relaxed) {
            return None;
        }
        let (reply, rx) = mpsc::sync_channel(1);
        self.send(Cmd::Report {
            dt,
            first_join_ns,
            overlay,
            reply,
        });
        rx.recv_timeout(wait).ok()
    }

    /// Stops the worker; returns the video path for the exit line.
    pub fn finish(mut self) -> Option<Video> {
        let (tx, _) = mpsc::sync_channel(1);
        drop(std::mem::replace(&mut self.tx, tx));
        self.thread.take().and_then(|t| t.join().ok()).flatten()
    }
}

fn worker(args: Args, rx: Receiver<Cmd>, sh: Arc<Shared>) -> Option<Video> {
    let mut video: Option<Video> = None;
    let mut held = 0usize;
    loop {
        let wait =
            video
                .as_ref()
                .and_then(Video::next_due)
                .map_or(Duration::from_millis(50), |d| {
                    Duration::from_nanos(d.saturating_sub(crate::net::realtime_ns()))
                        .min(Duration::from_millis(50))
                });
        match rx.recv_timeout(wait) {
            Ok(Cmd::Session(info)) => {
                video = Video::new(&info, &args, video.take());
                if let Some(v) = video.as_mut() {
                    v.set_layers(held);
                }
                sh.decoded.store(false, Ordering::Relaxed);
                sh.active.store(video.is_some(), Ordering::Relaxed);
            }
            Ok(Cmd::Layers(n)) => {
                held = n;
                if let Some(v) = video.as_mut() {
                    v.set_layers(n);
                }
            }
            Ok(Cmd::Packet { layer, data, ns }) => {
                if let Some(v) = video.as_mut() {
                    v.push(layer, &data, ns);
                }
            }
            Ok(Cmd::AvSync {
                sender_report,
                audio_clock,
            }) => {
                if let Some(v) = video.as_mut() {
                    v.set_av(sender_report, audio_clock);
                }
            }
            Ok(Cmd::KeyRequest) => {
                if let Some(v) = video.as_mut() {
                    v.key_requests += 1;
                }
            }
            Ok(Cmd::Report {
                dt,
                first_join_ns,
                overlay,
                reply,
            }) => {
                if let Some(v) = video.as_mut() {
                    let _ = reply.try_send(report(v, dt, first_join_ns, &overlay, &sh));
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return video,
        }
        if let Some(v) = video.as_mut() {
            if v.decoded > 0 {
                sh.decoded.store(true, Ordering::Relaxed);
            }
            sh.base_broken.store(v.base_broken(), Ordering::Relaxed);
            let need = v.take_audio_need();
            if need > 0 {
                sh.audio_need_ns.fetch_max(need, Ordering::Relaxed);
            }
            if let Some(f) = v.take_audio_floor() {
                sh.audio_floor_ns.fetch_max(f, Ordering::Relaxed);
            }
            let sync = v.take_sync_requests();
            if sync != 0 {
                sh.sync_request.fetch_or(sync, Ordering::Relaxed);
            }
            v.tick(crate::net::realtime_ns());
        }
    }
}

/// The `video` member of the per-second line (and what telemetry takes from it).
fn report(v: &mut Video, dt: f64, first_join: Option<u64>, overlay: &str, sh: &Shared) -> Value {
    let mut j = totals(v);
    j["frames_1s"] = json!(v.frames_1s);
    v.frames_1s = 0;
    let (head, rest) = overlay.split_once('\n').unwrap_or((overlay, ""));
    v.overlay(&format!(
        "{head}  {}x{}  {:.1} fps\n{rest}",
        v.width,
        v.height,
        j["frames_1s"].as_f64().unwrap_or(0.0) / dt
    ));
    j["on_audio_clock"] = json!(v.on_audio_clock);
    j["playout_jitter_ms"] = json!(v.playout_jitter_ms());
    let (all, top) = v.playout_terms_ms();
    j["playout_all_ms"] = json!(all);
    j["playout_top_ms"] = json!(top);
    j["av_late_dropped"] = json!(v.av_late_dropped);
    j["framelog"] = v.framelog_json();
    let since =
        |t: Option<u64>| first_join.and_then(|jn| t.map(|f| f.saturating_sub(jn) as f64 / 1e6));
    j["join_to_first_frame_ms"] = json!(since(v.first_shown_ns));
    j["join_to_first_decode_ms"] = json!(since(v.first_decoded_ns));
    j["queue_dropped"] = json!(sh.queue_dropped.load(Ordering::Relaxed));
    j
}

/// The video counters since start. The last per-second line can be up to a second old when
/// the player stops, so the exit line carries them too: its `frames` is the number of rows of
/// `frames.csv`.
pub fn totals(v: &mut Video) -> Value {
    let st = v.stats();
    json!({"frames": v.frames, "decoded": v.decoded, "late_frames": v.late_frames,
        "width": v.width, "height": v.height, "freezes": v.freezes,
        "decoder_errors": v.decoder_errors, "push_errors": v.push_errors,
        "pictures": st.pictures, "pictures_skipped": st.pictures_skipped,
        "frames_incomplete": st.frames_incomplete, "late": st.late,
        "malformed": st.malformed, "key_requests": v.key_requests,
        "hidden": v.hidden, "released_unrepaired": st.released_unrepaired,
        "encoder_dropped": {"frames": st.filler_frames, "pictures": st.filler_pictures},
        "shown_lower": v.shown_lower, "lower_decoder_errors": v.lower_decoder_errors()})
}
