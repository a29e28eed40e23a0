//! The send side of a session, sans-IO: one per session.
//!
//! ```text
//! encoder (pictures as RTP packets per ladder cell) -> push_picture / push_packet -> queues
//! audio encoder (Opus frames)                        -> push_audio -> poll_datagram: its
//!     packets and their lagged repairs, each sent on its own between two bunches
//! feedback datagrams (reports, media requests)       -> handle_feedback
//!     retransmission requests (sessions that announce it): the kept packets asked for, to
//!     the requester, within its budget ([`rtx`])     -> poll_retransmit
//! the host's control plane (an HTTP key request)     -> request_key / request_resync
//!                                                      poll_timeout: when the next bunch is due
//! the host waits until then, then                     poll_transmit(now) -> Bunch:
//!     layered sessions: the next bunch of the congestion crate's Schedule (each layer at its
//!     announced rate in equal-size bunches, golden-ratio phases), or a media layer's bunch
//!     up to its burst credit early ([`burst`]); each slot takes the layer's next media
//!     packet, else a FEC repair packet of the layer (`proto::fec`, with the parameters the
//!     announcement gives the layer's video stream), else padding; SSRC and sequence numbers
//!     per stream, the cc extension with the send time, sealing.
//!     TFMCC sessions: one packet at min(X, ceiling) ([`tfmcc`]).
//!                                                      poll_encoder_control: key picture,
//!                                                      re-sync, TFMCC target
//! ```
//!
//! Time: `now` is the host's monotonic clock; the cc extension's send time is
//! `now + clock_offset_us` (the host sets the offset to the Unix time of its clock's zero,
//! so receivers see wall-clock send times as before).

mod audio_out;
pub mod burst;
mod discard;
pub mod packet;
pub mod reports;
pub mod requests;
pub mod rtx;
pub mod tfmcc;

pub use burst::Burst;
pub use reports::{ReportConfig, REPORT_INTERVAL};
pub use requests::{EncoderControl, KEY_REQUEST_MIN_INTERVAL};
pub use rtx::{RtxConfig, RtxStats};

use crate::error::{Error, Result};
use congestion::schedule::Schedule;
use proto::fec::{FecEncoder, FecEncoderStats, FecParams};
use proto::wire::cc_ext::CcFields;
use proto::wire::frames_ext::{self, SentFrames};
use proto::wire::request::{MediaRequest, RequestKind, MAGIC as REQUEST_MAGIC};
use proto::{SessionInfo, Time, TrackKind};
use requests::Requests;
use security::auth::{MediaSealer, ReportMac};
use std::collections::VecDeque;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;
use tfmcc::TfmccSend;

/// One media packet from a packetiser: its header (SSRC and sequence number are the
/// Publisher's to set) and payload.
pub use proto::rtp::MediaPacket;

/// Bytes of a data packet ahead of its payload: the RTP header (12) and the cc extension block
/// (16). A repair packet's payload (FEC header and parity) fits the rest of the packet size.
pub const DATA_HEADER_LEN: usize = 12 + 16;

/// One encoded video picture: its packets per ladder cell (cell k rides in transport layer k;
/// in a TFMCC session all cells share the one stream).
#[derive(Clone, Debug, Default)]
pub struct Picture {
    pub key: bool,
    /// Some upper spatial layer re-synced in this picture.
    pub sync: bool,
    pub cells: Vec<Vec<MediaPacket>>,
}

/// A layer whose queue exceeds this drops its oldest packets (counted): the encoder overshot
/// the layer's announced rate for too long.
pub const MAX_QUEUED: usize = 400;

/// A bunch to send back to back (one `sendmmsg`).
#[derive(Debug)]
pub struct Bunch<'a> {
    pub layer: u8,
    /// When it could go (the host's start error is its send time minus this): its slot, or
    /// for media sent ahead of its slot, the later of its burst time and the arrival of the
    /// media. A burst time alone lies up to the credit in the past when a picture arrives
    /// after it, which read as a start error of up to 120 ms.
    pub due: Time,
    pub packets: &'a [Vec<u8>],
    /// Each packet's destination.
    pub dests: &'a [SocketAddrV4],
}

/// How a session is sent.
pub struct PublisherConfig {
    /// The announced session: layers (rates, groups, ports), packet size, bunch length and
    /// tracks (the SSRCs of their streams).
    pub info: SessionInfo,
    /// SSRC of layer k's padding and synthetic packets is `ssrc_base + k` (a video track's
    /// stream k has the same, `proto::Track::vp9_ladder`).
    pub ssrc_base: u32,
    pub payload_type: u8,
    /// The layers carry an encoder's media (padding fills the slots without media) rather
    /// than synthetic constant-rate data.
    pub media: bool,
    /// Media may go ahead of its slots (video sessions with `pacer_peak` > 1).
    pub burst: Option<Burst>,
    /// Seal every packet (encrypted sessions): packets are built `MEDIA_OVERHEAD` bytes short
    /// of the packet size and sealed to exactly it.
    pub sealer: Option<MediaSealer>,
    /// The report secret (`auth_reports` sessions): reports and media requests must carry a
    /// valid MAC.
    pub report_mac: Option<ReportMac>,
    /// Unix µs of the host clock's zero (see the module doc).
    pub clock_offset_us: u64,
    /// TFMCC: one group at the announced rate as the ceiling; `Some(max_kbps)` for a video
    /// session whose encoder target follows the rate, `None` for synthetic data.
    pub tfmcc: Option<Option<u32>>,
    /// A frame of a discardable layer (the video's top temporal layer when there are two or
    /// more: no later frame references it) is dropped whole, before it is queued, with the
    /// same picture's higher spatial frames, when its layer's queue would make its last packet
    /// wait longer than this at the layer's announced rate ([`discard`]). `None`: never.
    pub max_discardable_wait: Option<Duration>,
    /// A frame of a middle temporal layer (referenced only by the layers above it) is dropped
    /// with the frames that may predict from it when its layer's queue would make its last
    /// packet wait longer than this ([`discard`]). `None`: never.
    pub max_middle_wait: Option<Duration>,
    /// Send RTCP sender reports of every stream ([`Publisher::poll_report`]).
    pub reports: Option<ReportConfig>,
    /// Bounds of retransmission, for a session whose announcement offers it
    /// (`SessionInfo::retransmission`; layered media sessions only).
    pub rtx: RtxConfig,
    /// When the first cycle starts.
    pub start: Time,
}

impl PublisherConfig {
    /// A layered session of synthetic constant-rate data for `info`, in the clear, starting
    /// at time zero; set the other fields for media, sealing, TFMCC.
    pub fn new(info: SessionInfo, ssrc_base: u32) -> PublisherConfig {
        PublisherConfig {
            info,
            ssrc_base,
            payload_type: 96,
            media: false,
            burst: None,
            sealer: None,
            report_mac: None,
            clock_offset_us: 0,
            tfmcc: None,
            max_discardable_wait: None,
            max_middle_wait: None,
            reports: None,
            rtx: RtxConfig::default(),
            start: Time::ZERO,
        }
    }
}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublisherStats {
    pub packets: u64,
    pub bytes: u64,
    pub bunches: u64,
    pub per_layer_packets: Vec<u64>,
    /// Times the host fell more than a second behind and the schedule was re-anchored.
    pub resyncs: u64,
    pub pictures: u64,
    /// Media packets dropped from a full layer queue.
    pub dropped: u64,
    /// Frames of discardable layers dropped whole because their layer's queue was too long
    /// ([`PublisherConfig::max_discardable_wait`]), per layer.
    pub discarded_frames: Vec<u64>,
    /// Packets the sealer refused (sent as empty datagrams, never in the clear).
    pub seal_errors: u64,
    pub sealed: u64,
    /// Feedback datagrams that were neither a report nor a valid request, by reason.
    pub requests_refused: u64,
    /// Media-layer slots without media: sent as a FEC repair packet, or as padding.
    pub repair_packets: u64,
    pub padding_packets: u64,
    /// Audio frames pushed into a session without an audio track.
    pub audio_refused: u64,
    /// Retransmission counters (sessions that offer it).
    pub rtx: RtxStats,
}

struct Layered {
    schedule: Schedule,
    dests: Vec<SocketAddrV4>,
    queues: Vec<VecDeque<MediaPacket>>,
    seq: Vec<u16>,
    ext_seq: Vec<u64>,
    last_ts: Vec<u32>,
    last_sent: Vec<Option<Time>>,
    gap: Vec<Duration>,
    credit: Vec<Duration>,
    /// FEC encoder per layer (layers whose video stream announces repair).
    fec: Vec<Option<FecEncoder>>,
    /// Sessions that announce retransmission: the packets kept for it.
    rtx: Option<rtx::Retransmitter>,
    /// Which frames are left out, and each picture's sent-frames mark.
    discard: discard::FrameDiscard,
    /// When each layer's queue last went from empty to holding media.
    media_since: Vec<Time>,
}

enum Mode {
    Layered(Box<Layered>),
    Tfmcc(Box<TfmccSend>),
}

/// The send side of one session.
pub struct Publisher {
    info: SessionInfo,
    ssrc_base: u32,
    payload_type: u8,
    media: bool,
    sealer: Option<MediaSealer>,
    report_mac: Option<ReportMac>,
    clock_offset_us: u64,
    plain_size: usize,
    mode: Mode,
    requests: Requests,
    bufs: Vec<Vec<u8>>,
    bunch_dests: Vec<SocketAddrV4>,
    stats: PublisherStats,
    /// The audio track's send side (a session with one).
    audio: Option<crate::audio::AudioSend>,
    reports: Option<reports::Reports>,
}

impl Publisher {
    /// A sender for `cfg.info`.
    pub fn new(cfg: PublisherConfig) -> Result<Publisher> {
        let info = cfg.info;
        proto::wire::sam::validate(&info)?;
        let overhead = if cfg.sealer.is_some() {
            security::auth::MEDIA_OVERHEAD
        } else {
            0
        };
        let plain_size = (info.packet_size as usize)
            .checked_sub(overhead)
            .ok_or_else(|| Error::Config("packet size below the sealing overhead".into()))?;
        let n = info.layers.len();
        let video_cells = info
            .track(TrackKind::Video)
            .map_or(n, |t| t.streams.len().max(n));
        let mode = match cfg.tfmcc {
            Some(_) if info.retransmission => {
                return Err(Error::Config(
                    "TFMCC sessions do not offer retransmission".into(),
                ))
            }
            Some(video) => {
                if cfg.sealer.is_some() {
                    return Err(Error::Config("TFMCC sessions do not encrypt media".into()));
                }
                let l0 = &info.layers[0];
                let cells = info.track(TrackKind::Video).map(|t| match &t.codec {
                    proto::Codec::Vp9(p) => {
                        (p.spatial as usize * p.temporal.max(1) as usize).max(1)
                    }
                    _ => 1,
                });
                Mode::Tfmcc(Box::new(TfmccSend::new(
                    tfmcc::Wire {
                        packet_size: info.packet_size,
                        ssrc: cfg.ssrc_base,
                        payload_type: cfg.payload_type,
                    },
                    l0.rate_bps as f64,
                    cfg.report_mac.clone(),
                    video.map(|max| (cells.unwrap_or(video_cells), max)),
                )))
            }
            None => {
                let schedule = Schedule::new(&bunch_rates(&info), cfg.start)?;
                let intervals: Vec<Duration> = (0..n)
                    .map(|k| schedule.interval(k).unwrap_or_default())
                    .collect();
                let (gap, credit) = match &cfg.burst {
                    Some(b) if b.credit.len() == n && b.peak > 1.0 => (
                        intervals.iter().map(|i| i.div_f64(b.peak)).collect(),
                        b.credit.clone(),
                    ),
                    _ => (Vec::new(), Vec::new()),
                };
                Mode::Layered(Box::new(Layered {
                    schedule,
                    dests: info
                        .layers
                        .iter()
                        .map(|l| SocketAddrV4::new(l.group, l.port))
                        .collect(),
                    queues: vec![VecDeque::new(); n],
                    seq: vec![0; n],
                    ext_seq: vec![0; n],
                    last_ts: vec![0; n],
                    last_sent: vec![None; n],
                    media_since: vec![Time::ZERO; n],
                    gap,
                    credit,
                    fec: fec_encoders(&info, plain_size)?,
                    rtx: info
                        .retransmission
                        .then(|| rtx::Retransmitter::new(cfg.rtx.clone(), &info)),
                    discard: discard::FrameDiscard::new(
                        &info,
                        cfg.max_discardable_wait,
                        cfg.max_middle_wait,
                    ),
                }))
            }
        };
        let audio = match crate::audio::AudioLayout::of(&info) {
            Some(l) => Some(crate::audio::AudioSend::new(&l)?),
            None => None,
        };
        Ok(Publisher {
            reports: cfg
                .reports
                .map(|r| reports::Reports::new(r, &info, cfg.ssrc_base)),
            audio,
            bufs: (0..info.bunch_len.max(1))
                .map(|_| Vec::with_capacity(info.packet_size as usize))
                .collect(),
            bunch_dests: Vec::new(),
            stats: PublisherStats {
                per_layer_packets: vec![0; n],
                discarded_frames: vec![0; n],
                ..Default::default()
            },
            info,
            ssrc_base: cfg.ssrc_base,
            payload_type: cfg.payload_type,
            media: cfg.media,
            sealer: cfg.sealer,
            report_mac: cfg.report_mac,
            clock_offset_us: cfg.clock_offset_us,
            plain_size,
            mode,
            requests: Requests::default(),
        })
    }

    // ---------------------------------------------------------------- getters

    /// The announced session.
    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    /// Counters.
    pub fn stats(&self) -> &PublisherStats {
        &self.stats
    }

    /// Media requests received, and key pictures and re-syncs asked of the encoder.
    pub fn requests(&self) -> (u64, u64, u64) {
        (
            self.requests.received,
            self.requests.keys_asked,
            self.requests.syncs_asked,
        )
    }

    /// The FEC encoder counters of layer `k` (layers with repair).
    pub fn fec_stats(&self, k: usize) -> Option<&FecEncoderStats> {
        match &self.mode {
            Mode::Layered(l) => l.fec.get(k)?.as_ref().map(FecEncoder::stats),
            Mode::Tfmcc(_) => None,
        }
    }

    /// The TFMCC state of a TFMCC session.
    pub fn tfmcc(&mut self) -> Option<&mut TfmccSend> {
        match &mut self.mode {
            Mode::Tfmcc(t) => Some(t),
            Mode::Layered(_) => None,
        }
    }

    /// Media packets waiting, per layer (stream) of the video track. A layer whose queue
    /// keeps growing is coded over its announced rate; its packets reach every viewer late.
    pub fn queued_packets(&self) -> Vec<usize> {
        self.queues().iter().map(VecDeque::len).collect()
    }

    /// Media bytes waiting, all queues.
    pub fn queued_bytes(&self) -> usize {
        self.queues()
            .iter()
            .flatten()
            .map(|p| p.payload.len())
            .sum()
    }

    fn queues(&self) -> &[VecDeque<MediaPacket>] {
        match &self.mode {
            Mode::Layered(l) => &l.queues,
            Mode::Tfmcc(t) => &t.queues,
        }
    }

    // ---------------------------------------------------------------- inputs

    /// An encoded picture arrived.
    pub fn push_picture(&mut self, now: Time, pic: Picture) {
        self.stats.pictures += 1;
        self.requests.picture(now, pic.key, pic.sync);
        let bunch = self.info.bunch_len.max(1) as usize;
        let queues = match &mut self.mode {
            Mode::Layered(l) => {
                // Frames that would leave their layer's queue too late are not worth their
                // slots: the viewer's picture would wait for them (docs/server.md
                // "Discardable frames"). The rest carry the picture's sent-frames mark.
                let counts: Vec<usize> = pic.cells.iter().map(Vec::len).collect();
                let (queues, schedule) = (&l.queues, &l.schedule);
                let wait = |k: usize, n: usize| {
                    let q = queues.get(k)?;
                    Some(
                        schedule
                            .interval(k)?
                            .saturating_mul((q.len() + n).div_ceil(bunch) as u32),
                    )
                };
                let verdict = l
                    .discard
                    .applies()
                    .then(|| l.discard.judge(pic.key, &counts, wait));
                let mut cells = pic.cells;
                if let Some(v) = &verdict {
                    let mark = SentFrames {
                        spatial: v.sent,
                        unsent_before: v.unsent_before,
                    };
                    for (k, pkts) in cells.iter_mut().enumerate() {
                        if v.drop.get(k).copied().unwrap_or(false) {
                            self.stats.discarded_frames[k] += 1;
                            pkts.clear();
                        }
                        for p in pkts.iter_mut() {
                            p.header
                                .extensions
                                .push((frames_ext::ID, mark.to_bytes().to_vec()));
                        }
                    }
                }
                for (k, pkts) in cells.into_iter().enumerate() {
                    if !pkts.is_empty() && l.queues.get(k).is_some_and(VecDeque::is_empty) {
                        l.media_since[k] = now;
                    }
                    Self::enqueue(&mut l.queues, &mut self.stats, k, pkts);
                }
                return;
            }
            Mode::Tfmcc(t) => &mut t.queues,
        };
        for (k, pkts) in pic.cells.into_iter().enumerate() {
            Self::enqueue(queues, &mut self.stats, k, pkts);
        }
    }

    fn enqueue(
        queues: &mut [VecDeque<MediaPacket>],
        stats: &mut PublisherStats,
        k: usize,
        pkts: Vec<MediaPacket>,
    ) {
        let Some(q) = queues.get_mut(k) else {
            stats.dropped += pkts.len() as u64;
            return;
        };
        q.extend(pkts);
        while q.len() > MAX_QUEUED {
            q.pop_front();
            stats.dropped += 1;
        }
    }

    /// One packet of stream `stream` of the video track (ladder cell `stream`). The streams of
    /// other tracks (audio) are not sent in bunches (docs/protocols/audio.md): the host sends
    /// them between bunches, and they are refused here.
    pub fn push_packet(&mut self, track: u8, stream: u8, p: MediaPacket) -> Result<()> {
        let video = self
            .info
            .track(TrackKind::Video)
            .is_some_and(|t| t.id == track);
        match &mut self.mode {
            Mode::Layered(l) if video => l.queues.get_mut(stream as usize).map(|q| q.push_back(p)),
            Mode::Tfmcc(t) if video => t.queues.get_mut(stream as usize).map(|q| q.push_back(p)),
            _ => None,
        }
        .ok_or_else(|| Error::Config(format!("no send queue for track {track} stream {stream}")))
    }

    /// A datagram arrived on the feedback port from `src`: a TFMCC receiver report or a media
    /// request (`proto::wire::request`). Anything else is counted and dropped.
    pub fn handle_feedback(&mut self, now: Time, src: SocketAddr, bytes: &[u8]) {
        if bytes.starts_with(&REQUEST_MAGIC) {
            let req = match &self.report_mac {
                Some(m) => m.verify_request(bytes),
                None => MediaRequest::parse(bytes).and_then(|r| {
                    if r.auth == 0 {
                        Ok(r)
                    } else {
                        // A tag this sender has no key to check: refused, like reports.
                        Err(proto::Error::AuthFailed {
                            what: "media request",
                            reason: "no report key",
                        })
                    }
                }),
            };
            match req {
                Ok(r) if r.session_id == self.info.session_id => match r.kind {
                    RequestKind::KeyPicture => self.requests.key(),
                    RequestKind::Resync(s) => self.requests.resync(s),
                    RequestKind::Retransmit => self.retransmit(now, src, &r.nack),
                },
                _ => self.stats.requests_refused += 1,
            }
            return;
        }
        match &mut self.mode {
            Mode::Tfmcc(t) => t.handle_report(now, src.ip(), bytes),
            Mode::Layered(_) => self.stats.requests_refused += 1,
        }
    }

    /// A retransmission request: the layer is the one whose padding SSRC (`ssrc_base + k`,
    /// which its video stream shares) the request names.
    fn retransmit(&mut self, now: Time, src: SocketAddr, nack: &proto::wire::request::Nack) {
        let Mode::Layered(l) = &mut self.mode else {
            self.stats.requests_refused += 1;
            return;
        };
        let Some(r) = l.rtx.as_mut() else {
            self.stats.requests_refused += 1;
            return;
        };
        let k = nack.ssrc.wrapping_sub(self.ssrc_base) as usize;
        if k >= l.queues.len() {
            self.stats.requests_refused += 1;
            return;
        }
        r.request(now, src, k, &nack.seqs);
        self.stats.rtx = r.stats();
    }

    /// The next retransmission due at `now` (sessions that offer it): a kept packet, as first
    /// sent, and the requester it goes to. Send it at once, on the socket the requests arrive
    /// on; [`poll_timeout`](Self::poll_timeout) says when the next one is due.
    #[must_use]
    pub fn poll_retransmit(&mut self, now: Time) -> Option<(SocketAddr, Vec<u8>)> {
        let Mode::Layered(l) = &mut self.mode else {
            return None;
        };
        let r = l.rtx.as_mut()?;
        let out = r.poll(now);
        self.stats.rtx = r.stats();
        out
    }

    /// The host's control plane asks for a key picture (`POST .../keyframe`).
    pub fn request_key(&mut self) {
        self.requests.key();
    }

    /// The host's control plane asks for a re-sync of spatial layer `spatial`.
    pub fn request_resync(&mut self, spatial: u8) {
        self.requests.resync(spatial);
    }

    // ---------------------------------------------------------------- outputs

    /// What to ask the encoder now, if anything.
    #[must_use]
    pub fn poll_encoder_control(&mut self, now: Time) -> Option<EncoderControl> {
        if let Mode::Tfmcc(t) = &mut self.mode {
            if let Some(c) = t.poll_control() {
                return Some(c);
            }
        }
        self.requests.poll(now)
    }

    /// When [`poll_transmit`](Self::poll_transmit) (or a waiting media request) is next due.
    #[must_use]
    pub fn poll_timeout(&self, now: Time) -> Time {
        let t = match &self.mode {
            Mode::Layered(l) => {
                let bunch = next_layer(l).1;
                let rtx = l.rtx.as_ref().and_then(rtx::Retransmitter::next_due);
                rtx.map_or(bunch, |r| r.max(now).min(bunch))
            }
            Mode::Tfmcc(t) => t.poll_timeout(now),
        };
        let t = if self.audio.as_ref().is_some_and(|a| a.has_queued()) {
            t.min(now)
        } else {
            t
        };
        self.requests.deadline().map_or(t, |d| d.min(t))
    }

    /// The next bunch, if one is due at `now`.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Time) -> Option<Bunch<'_>> {
        let send_us = now.as_micros() + self.clock_offset_us;
        match &mut self.mode {
            Mode::Tfmcc(t) => {
                self.bufs.truncate(1);
                let due = t.transmit(now, send_us, &mut self.bufs[0])?;
                let dest = SocketAddrV4::new(self.info.layers[0].group, self.info.layers[0].port);
                self.bunch_dests.clear();
                self.bunch_dests.push(dest);
                let n = self.bufs[0].len() as u64;
                self.stats.packets += 1;
                self.stats.bytes += n;
                self.stats.bunches += 1;
                self.stats.per_layer_packets[0] += 1;
                self.stats.resyncs = t.resyncs;
                Some(Bunch {
                    layer: 0,
                    due,
                    packets: &self.bufs[..1],
                    dests: &self.bunch_dests,
                })
            }
            Mode::Layered(l) => {
                let (k, due) = next_layer(l);
                if now < due {
                    return None;
                }
                if now.saturating_since(due) > Duration::from_secs(1) {
                    // Held off the CPU: re-anchor every layer rather than emitting a second's
                    // worth of bunches at once.
                    self.stats.resyncs += 1;
                    l.schedule = Schedule::new(&self.info, now).ok()?;
                    l.last_sent.iter_mut().for_each(|t| *t = None);
                    return None;
                }
                let b = l.schedule.take(k);
                l.last_sent[k] = Some(now);
                let due = match l.queues[k].is_empty() {
                    true => due,
                    false => due.max(l.media_since[k]),
                };
                let len = b.count as usize;
                self.bunch_dests.clear();
                for pos in 0..len {
                    let cc = CcFields {
                        layer: k as u8,
                        bunch_pos: pos as u8,
                        bunch_len: b.count,
                        send_time_us: send_us,
                    };
                    let buf = &mut self.bufs[pos];
                    buf.clear();
                    let ssrc = self.ssrc_base.wrapping_add(k as u32);
                    let media = l.queues[k].front().is_some();
                    match l.queues[k].pop_front() {
                        Some(p) => {
                            l.last_ts[k] = p.header.timestamp;
                            if let Some(f) = l.fec[k].as_mut() {
                                f.push_media(l.seq[k], &p.header, &p.payload);
                            }
                            packet::write_media(buf, p, l.seq[k], &cc, self.plain_size);
                        }
                        // A slot without media: a repair packet of the layer (same stream,
                        // sequence space and size), padding when there is nothing to repair.
                        None if self.media => {
                            match l.fec[k].as_mut().and_then(FecEncoder::repair) {
                                Some(r) => {
                                    self.stats.repair_packets += 1;
                                    packet::write_media(buf, r, l.seq[k], &cc, self.plain_size);
                                }
                                None => {
                                    self.stats.padding_packets += 1;
                                    packet::write_padding(
                                        buf,
                                        self.payload_type,
                                        l.seq[k],
                                        l.last_ts[k],
                                        ssrc,
                                        &cc,
                                        self.plain_size,
                                    );
                                }
                            }
                        }
                        None => packet::write_packet(
                            buf,
                            self.payload_type,
                            l.seq[k],
                            (send_us.wrapping_mul(9) / 100) as u32,
                            ssrc,
                            &cc,
                            self.plain_size,
                        ),
                    }
                    seal(&mut self.sealer, &mut self.stats, buf, l.ext_seq[k]);
                    if let (true, Some(r)) = (media && self.media, l.rtx.as_mut()) {
                        r.sent(now, k, l.ext_seq[k], buf);
                    }
                    l.seq[k] = l.seq[k].wrapping_add(1);
                    l.ext_seq[k] += 1;
                    self.bunch_dests.push(l.dests[k]);
                }
                self.stats.packets += len as u64;
                self.stats.bytes += self.bufs[..len].iter().map(|b| b.len() as u64).sum::<u64>();
                self.stats.bunches += 1;
                self.stats.per_layer_packets[k] += len as u64;
                Some(Bunch {
                    layer: k as u8,
                    due,
                    packets: &self.bufs[..len],
                    dests: &self.bunch_dests,
                })
            }
        }
    }
}

/// The session as the bunch schedule sees it: each layer at its announced rate less the rates
/// of the other tracks' streams riding in it (audio is sent between bunches, unpadded, and its
/// rate is announced in layer 0's, docs/protocols/audio.md).
fn bunch_rates(info: &SessionInfo) -> SessionInfo {
    let mut i = info.clone();
    for s in info
        .tracks
        .iter()
        .filter(|t| t.kind != TrackKind::Video)
        .flat_map(|t| &t.streams)
    {
        if let Some(l) = i.layers.get_mut(s.layer as usize) {
            l.rate_bps = l.rate_bps.saturating_sub(s.rate_bps).max(1);
        }
    }
    i
}

/// A FEC encoder for each layer whose video stream announces repair parameters
/// (`proto::Stream::repair`): what the receivers are told is what is sent.
fn fec_encoders(info: &SessionInfo, plain_size: usize) -> Result<Vec<Option<FecEncoder>>> {
    let mut out: Vec<Option<FecEncoder>> = (0..info.layers.len()).map(|_| None).collect();
    let Some(t) = info.track(TrackKind::Video) else {
        return Ok(out);
    };
    for s in &t.streams {
        let (Some(r), Some(slot)) = (&s.repair, out.get_mut(s.layer as usize)) else {
            continue;
        };
        let bad = |e: proto::Error| Error::Config(format!("FEC of layer {}: {e}", s.layer));
        let p = FecParams::from_announced(r.payload_type, &r.params).map_err(bad)?;
        *slot = Some(FecEncoder::new(p, plain_size.saturating_sub(DATA_HEADER_LEN)).map_err(bad)?);
    }
    Ok(out)
}

/// The layer whose bunch goes next and when (the burst policy when there is one).
fn next_layer(l: &Layered) -> (usize, Time) {
    let n = l.schedule.layer_count();
    let next: Vec<Time> = (0..n)
        .map(|j| l.schedule.next_of(j).unwrap_or(Time::NEVER))
        .collect();
    if !l.gap.is_empty() {
        let media = |k: usize| !l.queues[k].is_empty();
        if let Some(x) = burst::next_bunch(&next, &l.last_sent, media, &l.gap, &l.credit) {
            return x;
        }
    }
    next.iter()
        .copied()
        .enumerate()
        .min_by_key(|&(_, t)| t)
        .unwrap_or((0, Time::NEVER))
}

/// Seals `buf` in place when the session is encrypted. A packet the sealer refuses is never
/// sent in the clear: an empty datagram goes instead (receivers count it malformed), keeping
/// the bunch's sequence numbers consistent.
fn seal(
    sealer: &mut Option<MediaSealer>,
    stats: &mut PublisherStats,
    buf: &mut Vec<u8>,
    ext_seq: u64,
) {
    let Some(s) = sealer.as_mut() else { return };
    match s.seal(buf, ext_seq) {
        Ok(sealed) => *buf = sealed,
        Err(_) => {
            stats.seal_errors += 1;
            buf.clear();
        }
    }
    stats.sealed += 1;
}

#[cfg(test)]
mod tests;
