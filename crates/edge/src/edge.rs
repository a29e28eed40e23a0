//! The edge core: sessions (relays) and browsers (viewers), one sans-IO state machine.
//!
//! Inputs: session descriptions, upstream packets, datagrams from browsers (all on one UDP
//! socket; demultiplexed by source address, then by ICE credentials), WHEP offers and
//! deletions, time. Outputs: datagrams to browsers ([`Edge::poll_transmit`]), events such as
//! key requests for upstream ([`Edge::poll_event`]), the next deadline ([`Edge::poll_timeout`]).

use crate::error::{Error, Result};
use crate::forward::Forwarder;
use crate::gate::GateEvent;
use crate::relay::{AudioPacket, Relay, RelayConfig, RelayStats, UpstreamPacket};
use crate::select::{Choice, SelectConfig, Selector};
use crate::viewer::{input, Transmit, Viewer, ViewerSignal, ViewerStats};
use crate::whep::{self, RtcSettings};
use proto::SessionInfo;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;

/// Loss (transport-wide feedback, last second) from which a down-switch asks for a key picture.
const HEAVY_LOSS: f32 = 0.06;

/// The deepest loss a burst's delivered rate is taken at. The first NACKs of an overflow are
/// often one frame's packets, sent back to back into the full queue and all lost (depth 1.0,
/// a delivered rate of nothing, which dropped a 4 -> 1 Mbit/s step to the lowest layer):
/// the path is taken to carry at least a quarter of what was sent, and a deeper step is
/// followed by the next evaluation.
const BURST_LOSS_CAP: f32 = 0.75;
use std::time::{Duration, Instant};

/// Configuration of the edge core.
#[derive(Debug, Clone)]
pub struct EdgeConfig {
    pub rtc: RtcSettings,
    /// Most browsers served at once.
    pub max_viewers: usize,
    pub relay: RelayConfig,
    pub select: SelectConfig,
    /// A start from the key-picture cache may send at most this many seconds' worth of the
    /// browser's estimate (else the edge asks upstream for a key picture).
    pub cache_start_secs: f64,
    /// A browser that has not connected (ICE + DTLS) this long after its offer is dropped.
    pub connect_timeout: Duration,
    /// Keep every latency sample of every viewer (the benchmark).
    pub log_latency: bool,
}

impl EdgeConfig {
    pub fn new(candidate: SocketAddr) -> Self {
        EdgeConfig {
            rtc: RtcSettings {
                candidate,
                initial_estimate_bps: 600_000,
                rtx_history: Duration::from_millis(1500),
            },
            max_viewers: 500,
            relay: RelayConfig::default(),
            select: SelectConfig::default(),
            cache_start_secs: 1.0,
            connect_timeout: Duration::from_secs(20),
            log_latency: false,
        }
    }
}

/// What the edge tells its shell.
#[derive(Debug, Clone, PartialEq)]
pub enum EdgeEvent {
    /// Ask the session's sender for a key picture.
    KeyRequest {
        session: String,
    },
    Connected {
        viewer: u64,
    },
    Gone {
        viewer: u64,
    },
    /// The layers chosen for a browser changed.
    Target {
        viewer: u64,
        from: Option<Choice>,
        to: Choice,
        reason: &'static str,
        estimate_bps: f64,
        loss: f32,
    },
}

/// One viewer, as the shell reports it (metrics, telemetry, the stats endpoint).
#[derive(Debug, Clone, PartialEq)]
pub struct ViewerReport {
    pub id: u64,
    pub session: String,
    pub connected: bool,
    pub remote: Option<SocketAddr>,
    /// Layers decoded now and layers targeted.
    pub current: Choice,
    pub target: Choice,
    pub width: u16,
    pub height: u16,
    pub fps: f64,
    /// Ladder index + 1 of the current top cell and the ladder length (a native player's
    /// "layers held / max").
    pub layers: u32,
    pub max_layers: u32,
    pub pictures: u64,
    pub stats: ViewerStats,
    pub forward: crate::forward::ForwardStats,
    pub age: Duration,
}

/// Edge-wide counters (raw, never reset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EdgeCounters {
    pub viewers_added: u64,
    pub viewers_gone: u64,
    pub refused_full: u64,
    pub refused_offer: u64,
    pub refused_session: u64,
    pub datagrams_in: u64,
    /// Datagrams no viewer accepted (or that are neither STUN, DTLS, RTP nor RTCP).
    pub datagrams_unmatched: u64,
    pub transmits: u64,
    pub transmit_bytes: u64,
    pub cache_starts: u64,
    pub key_requests: u64,
    pub layer_switches_up: u64,
    pub layer_switches_down: u64,
    /// Upstream packets for a session the edge does not serve.
    pub upstream_unknown_session: u64,
}

/// Repair and traffic totals over every viewer, past and present (raw, never reset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub media_packets: u64,
    pub audio_packets: u64,
    pub video_packets: u64,
    pub video_bytes: u64,
    pub nacks: u64,
    pub rtx_packets: u64,
    pub plis: u64,
    pub firs: u64,
    pub pictures: u64,
    /// Encoder fillers left out at the top of a browser's picture.
    pub fillers_left_out: u64,
    /// Second copies of NACKed packets sent, and the NACKed packets not copied: budget
    /// spent, the browser's loss too high, str0m's pacer holding a backlog (`resend.rs`).
    pub repair_copies: u64,
    pub repair_copies_refused: u64,
    pub repair_copies_skipped_loss: u64,
    pub repair_copies_skipped_backlog: u64,
}

impl Totals {
    fn add(&mut self, s: &ViewerStats, f: &crate::forward::ForwardStats) {
        self.media_packets += s.media_packets;
        self.audio_packets += s.audio_packets;
        self.video_packets += s.video_packets;
        self.video_bytes += s.video_bytes;
        self.nacks += s.nacks;
        self.rtx_packets += s.rtx_packets;
        self.plis += s.plis;
        self.firs += s.firs;
        self.pictures += f.pictures;
        self.fillers_left_out += f.fillers_left_out;
        self.repair_copies += s.repair_copies;
        self.repair_copies_refused += s.repair_copies_refused;
        self.repair_copies_skipped_loss += s.repair_copies_skipped_loss;
        self.repair_copies_skipped_backlog += s.repair_copies_skipped_backlog;
    }
}

/// The edge core.
pub struct Edge {
    conf: EdgeConfig,
    relays: BTreeMap<String, Relay>,
    viewers: BTreeMap<u64, Viewer>,
    by_addr: HashMap<SocketAddr, u64>,
    remote: HashMap<u64, SocketAddr>,
    next_id: u64,
    transmits: VecDeque<Transmit>,
    events: VecDeque<EdgeEvent>,
    counters: EdgeCounters,
    /// Totals of the viewers that left.
    departed: Totals,
}

impl Edge {
    pub fn new(conf: EdgeConfig) -> Edge {
        Edge {
            conf,
            relays: BTreeMap::new(),
            viewers: BTreeMap::new(),
            by_addr: HashMap::new(),
            remote: HashMap::new(),
            next_id: fastrand::u64(1..1 << 40),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            counters: EdgeCounters::default(),
            departed: Totals::default(),
        }
    }

    pub fn config(&self) -> &EdgeConfig {
        &self.conf
    }

    pub fn counters(&self) -> EdgeCounters {
        self.counters
    }

    pub fn viewer_count(&self) -> usize {
        self.viewers.len()
    }

    /// Sessions served, with their relay counters.
    pub fn sessions(&self) -> impl Iterator<Item = (&str, &Relay)> {
        self.relays.iter().map(|(k, r)| (k.as_str(), r))
    }

    pub fn has_session(&self, name: &str) -> bool {
        self.relays.contains_key(name)
    }

    /// Adds or updates a session.
    pub fn set_session(&mut self, name: &str, info: SessionInfo) -> Result<()> {
        match self.relays.get_mut(name) {
            Some(r) => {
                if r.update(info)? {
                    for v in self.viewers.values_mut().filter(|v| v.session == name) {
                        v.fwd.restart();
                    }
                }
                Ok(())
            }
            None => {
                let r = Relay::new(name, info, self.conf.relay)?;
                self.relays.insert(name.to_string(), r);
                Ok(())
            }
        }
    }

    /// Drops a session and every browser watching it.
    pub fn remove_session(&mut self, now: Instant, name: &str) {
        let ids: Vec<u64> = self.viewers_of(name);
        for id in ids {
            let _ = self.remove_viewer(now, id);
        }
        self.relays.remove(name);
    }

    fn viewers_of(&self, name: &str) -> Vec<u64> {
        self.viewers
            .iter()
            .filter(|(_, v)| v.session == name)
            .map(|(&id, _)| id)
            .collect()
    }

    /// A browser's WHEP offer: its id and the SDP answer.
    pub fn add_viewer(
        &mut self,
        now: Instant,
        session: &str,
        offer: &str,
    ) -> Result<(u64, String)> {
        let Some(relay) = self.relays.get(session) else {
            self.counters.refused_session += 1;
            return Err(Error::UnknownSession(session.to_string()));
        };
        if self.viewers.len() >= self.conf.max_viewers {
            self.counters.refused_full += 1;
            return Err(Error::Full {
                current: self.viewers.len(),
                max: self.conf.max_viewers,
            });
        }
        let (rtc, answer, neg) = whep::accept(now, &self.conf.rtc, offer).inspect_err(|_| {
            self.counters.refused_offer += 1;
        })?;
        let mut sel = Selector::new(self.conf.select);
        let cands = relay.candidates(now, &self.conf.select);
        let target = sel
            .update(
                now,
                self.conf.rtc.initial_estimate_bps as f64,
                0.0,
                None,
                None,
                &cands,
            )
            .map(|(c, _)| c)
            .unwrap_or_default();
        let fwd = Forwarder::new(relay.layout().spatial, target);
        let id = self.next_id;
        self.next_id += 1;
        let mut v = Viewer::new(id, session.to_string(), now, rtc, neg, fwd, sel);
        v.set_rtx_history(self.conf.rtc.rtx_history);
        if self.conf.log_latency {
            v.latency_log = Some(Vec::new());
        }
        v.handle_timeout(now, &mut self.transmits);
        self.viewers.insert(id, v);
        self.counters.viewers_added += 1;
        Ok((id, answer))
    }

    /// Ends a browser's session (WHEP DELETE).
    pub fn remove_viewer(&mut self, now: Instant, id: u64) -> Result<()> {
        let mut v = self.viewers.remove(&id).ok_or(Error::UnknownViewer(id))?;
        v.disconnect(now, &mut self.transmits);
        self.departed.add(&v.stats(), &v.fwd.stats());
        self.forget(id);
        Ok(())
    }

    fn forget(&mut self, id: u64) {
        if let Some(a) = self.remote.remove(&id) {
            self.by_addr.remove(&a);
        }
        self.counters.viewers_gone += 1;
        self.events.push_back(EdgeEvent::Gone { viewer: id });
    }

    /// The session `id` watches.
    pub fn viewer_session(&self, id: u64) -> Option<&str> {
        self.viewers.get(&id).map(|v| v.session.as_str())
    }

    /// Every latency sample of a viewer (with `log_latency`), microseconds.
    pub fn take_latency_log(&mut self, id: u64) -> Vec<u64> {
        self.viewers
            .get_mut(&id)
            .and_then(|v| v.latency_log.as_mut())
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// An upstream packet of session `name`.
    pub fn handle_upstream(&mut self, now: Instant, name: &str, p: UpstreamPacket<'_>) {
        let Some(relay) = self.relays.get_mut(name) else {
            self.counters.upstream_unknown_session += 1;
            return;
        };
        if let Some(a) = relay.push(p) {
            self.forward_audio(now, name, a);
        }
        self.dispatch(now, name);
        self.settle(now);
    }

    fn forward_audio(&mut self, now: Instant, name: &str, a: AudioPacket) {
        for v in self.viewers.values_mut().filter(|v| v.session == name) {
            v.write_audio(
                now,
                a.payload.clone(),
                a.timestamp,
                a.marker,
                a.at,
                &mut self.transmits,
            );
        }
    }

    /// Hands the session's gate events to its browsers and writes what they forward.
    fn dispatch(&mut self, now: Instant, name: &str) {
        let Some(relay) = self.relays.get_mut(name) else {
            return;
        };
        let mut evs: Vec<GateEvent> = Vec::new();
        while let Some(e) = relay.poll_gate_event() {
            evs.push(e);
        }
        if evs.is_empty() {
            return;
        }
        let gate = relay.gate();
        for v in self.viewers.values_mut().filter(|v| v.session == name) {
            if !v.connected() {
                continue;
            }
            for &e in &evs {
                v.fwd.on_event(gate, e);
            }
            v.write_video(now, &mut self.transmits);
        }
    }

    /// A datagram from a browser. Returns whether a viewer took it.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        source: SocketAddr,
        destination: SocketAddr,
        contents: &[u8],
    ) -> bool {
        self.counters.datagrams_in += 1;
        let Some(inp) = input(now, source, destination, contents) else {
            self.counters.datagrams_unmatched += 1;
            return false;
        };
        let id = match self.by_addr.get(&source) {
            Some(&id) if self.viewers.get(&id).is_some_and(|v| v.accepts(&inp)) => Some(id),
            _ => self
                .viewers
                .iter()
                .find(|(_, v)| v.accepts(&inp))
                .map(|(&id, _)| id),
        };
        let Some(id) = id else {
            self.counters.datagrams_unmatched += 1;
            return false;
        };
        if self.remote.get(&id) != Some(&source) {
            if let Some(old) = self.remote.insert(id, source) {
                self.by_addr.remove(&old);
            }
            self.by_addr.insert(source, id);
        }
        if let Some(v) = self.viewers.get_mut(&id) {
            v.handle_input(now, inp, &mut self.transmits);
        }
        self.settle(now);
        true
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        let names: Vec<String> = self.relays.keys().cloned().collect();
        for n in &names {
            if let Some(r) = self.relays.get_mut(n) {
                r.handle_timeout(now);
            }
            self.dispatch(now, n);
        }
        for v in self.viewers.values_mut() {
            v.handle_timeout(now, &mut self.transmits);
        }
        let stale: Vec<u64> = self
            .viewers
            .iter()
            .filter(|(_, v)| !v.connected() && now >= v.created_at + self.conf.connect_timeout)
            .map(|(&id, _)| id)
            .collect();
        for id in stale {
            let _ = self.remove_viewer(now, id);
        }
        self.settle(now);
    }

    /// Acts on what the viewers signalled, removes closed ones, sends key requests.
    fn settle(&mut self, now: Instant) {
        let ids: Vec<u64> = self.viewers.keys().copied().collect();
        for id in ids {
            while let Some(sig) = self.viewers.get_mut(&id).and_then(|v| v.poll_signal()) {
                match sig {
                    ViewerSignal::Connected => {
                        self.events.push_back(EdgeEvent::Connected { viewer: id });
                        self.select(now, id);
                        self.start(now, id);
                    }
                    ViewerSignal::KeyRequest => {
                        let started = self.viewers.get(&id).is_some_and(|v| v.fwd.started());
                        if started {
                            if let Some(r) = self
                                .viewers
                                .get(&id)
                                .and_then(|v| self.relays.get_mut(&v.session))
                            {
                                r.want_key();
                            }
                        } else {
                            self.start(now, id);
                        }
                    }
                    ViewerSignal::Estimate => self.select(now, id),
                    ViewerSignal::Closed => {
                        if let Some(v) = self.viewers.remove(&id) {
                            self.departed.add(&v.stats(), &v.fwd.stats());
                        }
                        self.forget(id);
                        break;
                    }
                }
            }
        }
        for (name, r) in self.relays.iter_mut() {
            if self.viewers.values().any(|v| &v.session == name) && r.poll_key_request(now) {
                self.counters.key_requests += 1;
                self.events.push_back(EdgeEvent::KeyRequest {
                    session: name.clone(),
                });
            }
        }
    }

    /// Starts a connected browser that has no key picture yet: from the cache if its chain
    /// fits the budget, else by asking upstream.
    fn start(&mut self, now: Instant, id: u64) {
        let Some(v) = self.viewers.get_mut(&id) else {
            return;
        };
        if v.fwd.started() || !v.connected() {
            return;
        }
        let Some(relay) = self.relays.get_mut(&v.session) else {
            return;
        };
        let est = v
            .stats()
            .estimate_bps
            .unwrap_or(self.conf.rtc.initial_estimate_bps as f64);
        let budget = est * self.conf.cache_start_secs / 8.0;
        let want = v.fwd.target().spatial;
        let pick = (0..=want)
            .rev()
            .filter_map(|s| relay.chain(s).map(|c| (s, c)))
            .find(|(_, (_, bytes))| *bytes as f64 <= budget);
        match pick {
            Some((s, (chain, _))) => {
                v.fwd.start_from_chain(relay.gate(), &chain, s);
                v.write_video(now, &mut self.transmits);
                self.counters.cache_starts += 1;
            }
            None => relay.want_key(),
        }
    }

    /// Re-evaluates a browser's layers from its estimate.
    fn select(&mut self, now: Instant, id: u64) {
        let Some(v) = self.viewers.get_mut(&id) else {
            return;
        };
        let Some(relay) = self.relays.get(&v.session) else {
            return;
        };
        let cands = relay.candidates(now, &self.conf.select);
        let st = v.stats();
        let est = st
            .estimate_bps
            .unwrap_or(self.conf.rtc.initial_estimate_bps as f64);
        let from = v.sel.current();
        // The estimate covers the whole transport: what the audio takes is not there for video.
        let video_est = v.sel.video_share(est, st.audio_rate_bps);
        // A pacer backlog: what leaves now is str0m's pacing rate, 1.1 × its current estimate.
        let departure = v.departure_rate(now);
        let paced = (v.pacer_backlog(now) >= self.conf.select.backlog_max)
            .then(|| v.sel.video_share(departure / 1.1, st.audio_rate_bps));
        // A loss burst (a queue overflowing on the path): what gets through is what is sent
        // less what the burst loses, whatever the estimate says yet; a bound like the
        // pacer's, so the first reaction is the whole way down, not a temporal layer at a time.
        let burst = v.burst_loss(now);
        let delivered = burst.map(|l| {
            let through = f64::from(1.0 - l.min(BURST_LOSS_CAP));
            v.sel.video_share(departure * through, st.audio_rate_bps)
        });
        let paced = [paced, delivered].into_iter().flatten().reduce(f64::min);
        let loss = st.loss.max(burst.unwrap_or(0.0));
        if let Some((to, reason)) = v.sel.update(now, video_est, loss, st.rtt, paced, &cands) {
            v.fwd.set_target(to);
            if let Some(f) = from {
                if to > f {
                    self.counters.layer_switches_up += 1;
                } else {
                    self.counters.layer_switches_down += 1;
                    v.restart_burst();
                }
            }
            self.events.push_back(EdgeEvent::Target {
                viewer: id,
                from,
                to,
                reason: reason.as_str(),
                estimate_bps: est,
                loss,
            });
        }
        // Heavy loss around a down-switch (a path step overflowed its queue before any
        // estimate could react) leaves the browser with pictures it can only complete from
        // many repairs, behind the pacer's backlog: it freezes until they all arrived or the
        // next key picture. One key picture at the new layers ends that sooner (one request
        // per session and second, `Relay::want_key`).
        let heavy = loss >= HEAVY_LOSS && v.sel.went_down_within(now, Duration::from_secs(2));
        if heavy && v.fwd.started() {
            if let Some(r) = self.relays.get_mut(&v.session) {
                r.want_key();
                v.drop_repairs_at_key();
            }
        }
        let Some(relay) = self.relays.get(&v.session) else {
            return;
        };
        if let Some((min, desired)) =
            v.sel
                .bwe_targets(now, &relay.ladder(now, &self.conf.select), video_est)
        {
            v.set_bwe_targets(now, min, desired, &mut self.transmits);
        }
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.transmits.pop_front()?;
        self.counters.transmits += 1;
        self.counters.transmit_bytes += t.contents.len() as u64;
        Some(t)
    }

    pub fn poll_event(&mut self) -> Option<EdgeEvent> {
        self.events.pop_front()
    }

    /// The next deadline (None: nothing scheduled).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let v = self.viewers.values().map(|v| v.timeout());
        let c = self
            .viewers
            .values()
            .filter(|v| !v.connected())
            .map(|v| v.created_at + self.conf.connect_timeout);
        let r = self.relays.values().filter_map(|r| r.poll_timeout());
        v.chain(c).chain(r).min()
    }

    /// Every viewer, for metrics, telemetry and the stats endpoint.
    pub fn reports(&self, now: Instant) -> Vec<ViewerReport> {
        self.viewers
            .values()
            .map(|v| self.report_of(now, v))
            .collect()
    }

    pub fn report(&self, now: Instant, id: u64) -> Option<ViewerReport> {
        self.viewers.get(&id).map(|v| self.report_of(now, v))
    }

    fn report_of(&self, now: Instant, v: &Viewer) -> ViewerReport {
        let cur = v.layers();
        let layout = self.relays.get(&v.session).map(|r| r.layout());
        let (w, h) = layout
            .and_then(|l| l.resolutions.get(cur.spatial as usize).copied())
            .unwrap_or((0, 0));
        let fps = layout.map_or(0.0, |l| l.fps_of(cur.temporal));
        let max_layers = layout.map_or(0, |l| l.streams.len() as u32);
        let layers = if v.fwd.started() {
            layout.map_or(0, |l| l.ladder_index(cur.spatial, cur.temporal) as u32 + 1)
        } else {
            0
        };
        ViewerReport {
            id: v.id,
            session: v.session.clone(),
            connected: v.connected(),
            remote: self.remote.get(&v.id).copied(),
            current: cur,
            target: v.fwd.target(),
            width: if v.fwd.started() { w } else { 0 },
            height: if v.fwd.started() { h } else { 0 },
            fps: if v.fwd.started() { fps } else { 0.0 },
            layers,
            max_layers,
            pictures: v.fwd.stats().pictures,
            stats: v.stats(),
            forward: v.fwd.stats(),
            age: now.saturating_duration_since(v.created_at),
        }
    }

    /// Traffic and repair totals over every viewer so far.
    pub fn totals(&self) -> Totals {
        let mut t = self.departed;
        for v in self.viewers.values() {
            t.add(&v.stats(), &v.fwd.stats());
        }
        t
    }

    /// Counters of a session.
    pub fn relay_stats(&self, name: &str) -> Option<RelayStats> {
        self.relays.get(name).map(|r| r.stats())
    }
}
