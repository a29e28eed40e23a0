//! One session at the edge: its video gate and key-picture cache, its audio, the measured
//! rates of its cells, and the aggregation of key-picture requests towards the sender.
//!
//! Key requests from every browser of the session (a PLI the cache cannot answer, a start
//! without a usable cache, a broken base layer) collapse into one flag; at most one request
//! per `key_request_interval` leaves for upstream, and none once a key picture has arrived.

use crate::error::Result;
use crate::gate::{Gate, GateConfig, GateEvent, GateStats};
use crate::keycache::{Chain, KeyCache};
use crate::layout::{Cell, VideoLayout};
use crate::repair::{RepairStats, UpstreamRepair, Verdict};
use crate::select::{candidates, Candidate, SelectConfig};
use crate::vp9::Continuity;
use codec::rtp::RtpPacket;
use proto::media::{Codec, TrackKind};
use proto::SessionInfo;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One upstream RTP packet, as the session's subscriber delivers it.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamPacket<'a> {
    /// Track id (`proto::media::Track::id`).
    pub track: u8,
    /// Stream index in the track: for video, the cumulative layer it rides in.
    pub stream: u8,
    pub rtp: &'a [u8],
    /// When it arrived.
    pub at: Instant,
}

/// Tuning of a session relay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelayConfig {
    pub gate: GateConfig,
    pub key_cache_bytes: usize,
    /// At most one key request upstream per this interval (the server itself grants one per
    /// second).
    pub key_request_interval: Duration,
    /// Window of the measured cell rates.
    pub rate_window: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            gate: GateConfig::default(),
            key_cache_bytes: 8 << 20,
            key_request_interval: Duration::from_secs(1),
            rate_window: Duration::from_secs(2),
        }
    }
}

/// An audio packet to forward to every browser of the session.
#[derive(Debug, Clone)]
pub struct AudioPacket {
    pub payload: Arc<[u8]>,
    pub timestamp: u32,
    pub marker: bool,
    pub at: Instant,
}

#[derive(Debug)]
struct Audio {
    track: u8,
    payload_type: u8,
}

/// Counters of a relay (raw, never reset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayStats {
    pub gate: GateStats,
    pub repair: RepairStats,
    pub audio_packets: u64,
    /// Packets of a track or stream the session does not have.
    pub unknown_stream: u64,
    pub key_requests: u64,
    /// Requests from browsers folded into one already pending or sent.
    pub key_requests_folded: u64,
    pub restarts: u64,
}

/// One session at the edge.
#[derive(Debug)]
pub struct Relay {
    pub name: String,
    info: SessionInfo,
    conf: RelayConfig,
    gate: Gate,
    repair: UpstreamRepair,
    /// Scratch for the packets the repair rebuilds.
    recovered: Vec<Vec<u8>>,
    cache: KeyCache,
    audio: Option<Audio>,
    audio_ts_offset: u32,
    key_wanted: bool,
    last_key_request: Option<Instant>,
    /// (time, cell, bytes) of released frames in the rate window.
    released: VecDeque<(Instant, Cell, usize)>,
    /// Bytes of `released` per cell (`cell_index`), kept as frames come and go: every
    /// browser's layer choice asks for the rates several times a second.
    cell_bytes: [usize; 64],
    stats: RelayStats,
}

fn cell_index(c: Cell) -> usize {
    usize::from(c.spatial.min(7)) * 8 + usize::from(c.temporal.min(7))
}

impl Relay {
    pub fn new(name: &str, info: SessionInfo, conf: RelayConfig) -> Result<Relay> {
        let layout = VideoLayout::from_session(name, &info)?;
        let spatial = layout.spatial;
        let audio = audio_of(&info);
        Ok(Relay {
            name: name.to_string(),
            conf,
            gate: Gate::new(layout, conf.gate, Continuity::default()),
            repair: UpstreamRepair::new(&info),
            recovered: Vec::new(),
            cache: KeyCache::new(spatial, conf.key_cache_bytes),
            audio,
            audio_ts_offset: 0,
            key_wanted: true,
            last_key_request: None,
            released: VecDeque::new(),
            cell_bytes: [0; 64],
            stats: RelayStats::default(),
            info,
        })
    }

    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub fn cache(&self) -> &KeyCache {
        &self.cache
    }

    pub fn layout(&self) -> &VideoLayout {
        self.gate.layout()
    }

    pub fn stats(&self) -> RelayStats {
        RelayStats {
            gate: self.gate.stats(),
            repair: self.repair.stats(),
            ..self.stats
        }
    }

    /// A new session description. A restarted session (new id) or a changed video layout
    /// starts a new gate whose picture IDs and timestamps continue the old ones; returns
    /// whether that happened.
    pub fn update(&mut self, info: SessionInfo) -> Result<bool> {
        let layout = VideoLayout::from_session(&self.name, &info)?;
        let restart = info.session_id != self.info.session_id
            || layout.streams != self.gate.layout().streams
            || layout.payload_type != self.gate.layout().payload_type;
        if restart {
            let spatial = layout.spatial;
            self.gate = Gate::new(
                layout,
                self.conf.gate,
                Continuity::carry(self.gate.continuity()),
            );
            self.cache = KeyCache::new(spatial, self.conf.key_cache_bytes);
            self.repair = UpstreamRepair::new(&info);
            self.released.clear();
            self.cell_bytes = [0; 64];
            self.key_wanted = true;
            self.stats.restarts += 1;
            self.audio_ts_offset = self.audio_ts_offset.wrapping_add(48_000);
        }
        self.audio = audio_of(&info);
        self.info = info;
        Ok(restart)
    }

    /// One upstream packet. Video goes to the gate (take its events with
    /// [`Relay::poll_gate_event`]); audio comes back, to forward.
    pub fn push(&mut self, p: UpstreamPacket<'_>) -> Option<AudioPacket> {
        let video_track = self.gate.layout().track_id;
        if p.track == video_track {
            let stream = p.stream as usize;
            let verdict = self.repair.push(stream, p.rtp, &mut self.recovered);
            for r in self.recovered.drain(..) {
                self.gate.push(p.at, stream, &r);
            }
            if verdict == Verdict::Media {
                self.gate.push(p.at, stream, p.rtp);
            }
            return None;
        }
        let Some(a) = &self.audio else {
            self.stats.unknown_stream += 1;
            return None;
        };
        if p.track != a.track || p.stream != 0 {
            self.stats.unknown_stream += 1;
            return None;
        }
        let Ok(pkt) = RtpPacket::parse(p.rtp) else {
            self.stats.unknown_stream += 1;
            return None;
        };
        if pkt.payload_type() != a.payload_type || pkt.payload().is_empty() {
            self.stats.unknown_stream += 1;
            return None;
        }
        self.stats.audio_packets += 1;
        Some(AudioPacket {
            payload: pkt.payload().into(),
            timestamp: pkt.timestamp().wrapping_add(self.audio_ts_offset),
            marker: pkt.marker(),
            at: p.at,
        })
    }

    /// The next gate event (the cache and the rate meter have seen it).
    pub fn poll_gate_event(&mut self) -> Option<GateEvent> {
        let ev = self.gate.poll_event()?;
        self.cache.on_event(&self.gate, ev);
        if let GateEvent::Released { pid, spatial } = ev {
            if let Some(f) = self.gate.frame(pid, spatial) {
                let cell = Cell {
                    spatial,
                    temporal: f.temporal,
                };
                self.released.push_back((f.completed_at, cell, f.bytes));
                self.cell_bytes[cell_index(cell)] += f.bytes;
                if f.key && spatial == 0 {
                    self.key_wanted = false;
                }
            }
        }
        if !self.gate.base_intact() {
            self.want_key();
        }
        Some(ev)
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.gate.handle_timeout(now);
        let horizon = now.checked_sub(self.conf.rate_window);
        while self
            .released
            .front()
            .is_some_and(|(t, _, _)| horizon.is_some_and(|h| *t < h))
        {
            if let Some((_, cell, b)) = self.released.pop_front() {
                let n = &mut self.cell_bytes[cell_index(cell)];
                *n = n.saturating_sub(b);
            }
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let key = (self.key_wanted)
            .then(|| {
                self.last_key_request
                    .map(|t| t + self.conf.key_request_interval)
            })
            .flatten();
        [self.gate.poll_timeout(), key].into_iter().flatten().min()
    }

    /// A browser needs a key picture the cache cannot give.
    pub fn want_key(&mut self) {
        if self.key_wanted {
            self.stats.key_requests_folded += 1;
        }
        self.key_wanted = true;
    }

    /// Whether to send one key request upstream now.
    pub fn poll_key_request(&mut self, now: Instant) -> bool {
        if !self.key_wanted {
            return false;
        }
        if self
            .last_key_request
            .is_some_and(|t| now < t + self.conf.key_request_interval)
        {
            return false;
        }
        self.last_key_request = Some(now);
        self.stats.key_requests += 1;
        true
    }

    /// The cache's chain at spatial layers `0..=s`, if it is usable.
    pub fn chain(&self, s: u8) -> Option<(Chain, usize)> {
        self.cache.chain(s)
    }

    /// Measured media rate of a cell over the window, bit/s (None: nothing seen).
    fn cell_rate(&self, c: Cell, now: Instant) -> Option<f64> {
        let bytes = self.cell_bytes[cell_index(c)];
        let oldest = self.released.front()?.0;
        let span = now
            .saturating_duration_since(oldest)
            .max(Duration::from_millis(500))
            .as_secs_f64();
        (bytes > 0).then(|| bytes as f64 * 8.0 / span)
    }

    /// The operating points a browser can be given now, with their measured rates (announced
    /// ones before anything was measured). Points whose cells have not arrived recently, or
    /// above a broken chain, are left out.
    pub fn candidates(&self, now: Instant, conf: &SelectConfig) -> Vec<Candidate> {
        self.points(now, conf, self.gate.intact_top().unwrap_or(0), false)
    }

    /// Every operating point of the layout, whether or not its chain is intact now, with its
    /// measured rate where there is one and its announced rate otherwise: what the browsers'
    /// estimates must be kept ready for (padding, probing) while an upper layer is broken
    /// upstream for a moment, so that they can take it again at its next switch point.
    pub fn ladder(&self, now: Instant, conf: &SelectConfig) -> Vec<Candidate> {
        let top = self.gate.layout().spatial.saturating_sub(1);
        self.points(now, conf, top, true)
    }

    fn points(
        &self,
        now: Instant,
        conf: &SelectConfig,
        top: u8,
        announced: bool,
    ) -> Vec<Candidate> {
        let l = self.gate.layout();
        // Measured rates once the window holds a second of releases (before that a key
        // picture alone would dominate them).
        let measured = self
            .released
            .front()
            .is_some_and(|(t, _, _)| now.saturating_duration_since(*t) >= Duration::from_secs(1));
        let rate = |s: u8, t: u8| -> f64 {
            if !measured {
                return l.rate_of(s, t) as f64;
            }
            let mut sum = 0.0;
            for ss in 0..=s {
                for tt in 0..=t {
                    match self.cell_rate(
                        Cell {
                            spatial: ss,
                            temporal: tt,
                        },
                        now,
                    ) {
                        Some(r) => sum += r,
                        None if announced => {
                            return l.rate_of(s, t) as f64;
                        }
                        None => return f64::INFINITY,
                    }
                }
            }
            sum
        };
        candidates(l, top, conf, rate)
            .into_iter()
            .filter(|c| c.rate_bps.is_finite())
            .collect()
    }
}

fn audio_of(info: &SessionInfo) -> Option<Audio> {
    let t = info.track(TrackKind::Audio)?;
    let Codec::Opus(p) = &t.codec else {
        return None;
    };
    Some(Audio {
        track: t.id,
        payload_type: p.payload_type,
    })
}
