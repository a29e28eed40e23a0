//! The frame gate: turns the session's per-layer RTP streams into layer frames that are
//! complete and whose whole reference chain is complete, shared by every browser of the
//! session. It is also the per-layer packet history: released frames keep their packets (in the
//! form the browsers get them) for `history`.
//!
//! Why frames, not pictures: the upstream layers are paced independently, each at its own
//! rate, so a picture's 720p frame arrives long after its 180p frame. A browser that only takes
//! 180p must not wait for it; one that takes 720p needs it anyway. So each frame is released as
//! soon as it is complete and everything it references has been released: the temporal
//! references from the picture group (non-flexible mode, RFC 9628 §4.2.1), the lower spatial
//! layer of the same picture when D = 1. A frame that cannot complete (a packet lost upstream:
//! its stream moved on, or `frame_timeout` passed) or whose reference was lost is declared
//! lost, so that nothing waits for it.
//!
//! Sans-IO: packets in with their arrival time, [`GateEvent`]s out, a deadline from
//! [`Gate::poll_timeout`]. No clock is read.

use crate::layout::{Cell, VideoLayout};
use crate::vp9::{browser_payload, Continuity, OutFields};
use codec::depay::is_filler;
use codec::rtp::RtpPacket;
use codec::vp9rtp::PayloadDescriptor;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tuning of the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateConfig {
    /// A frame still incomplete this long after its latest packet is lost (its packets stopped
    /// coming: the layer was left, or the rest was lost).
    pub frame_timeout: Duration,
    /// A frame still incomplete this long after its first packet is lost, whatever still comes:
    /// a key frame paced at its layer's rate may take a second to arrive, not more.
    pub frame_max: Duration,
    /// After its stream has moved on to a newer picture, an incomplete frame waits this long
    /// for a reordered packet before it is lost.
    pub reorder_grace: Duration,
    /// How long released frames (the per-layer packet history) are kept.
    pub history: Duration,
    /// Hard cap on frames tracked (released, pending or lost).
    pub max_frames: usize,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            frame_timeout: Duration::from_millis(300),
            frame_max: Duration::from_millis(2500),
            reorder_grace: Duration::from_millis(20),
            history: Duration::from_millis(1500),
            max_frames: 4096,
        }
    }
}

/// What the gate tells the browsers' forwarders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateEvent {
    /// The first packet of a frame arrived; `switch_point` is P = 0 (a key picture's frame or
    /// a spatial-layer sync), which lets a browser join that spatial layer here.
    Started {
        pid: u64,
        spatial: u8,
        switch_point: bool,
    },
    /// The frame is complete and decodable; its packets are in [`Gate::frame`].
    Released { pid: u64, spatial: u8 },
    /// The frame will not be released.
    Lost { pid: u64, spatial: u8 },
}

/// One packet as a browser gets it (before its own sequence number and marker).
#[derive(Debug, Clone)]
pub struct OutPacket {
    /// The browser-form payload: rewritten descriptor + the VP9 bytes as they came.
    pub payload: Arc<[u8]>,
    /// RTP timestamp in the edge's continuous space.
    pub timestamp: u32,
    /// Arrival at the edge.
    pub at: Instant,
}

/// A released frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub temporal: u8,
    /// P = 0: key picture frame (spatial 0) or spatial-layer sync.
    pub switch_point: bool,
    /// The picture is a key picture.
    pub key: bool,
    pub packets: Vec<OutPacket>,
    pub bytes: usize,
    /// When its last packet arrived.
    pub completed_at: Instant,
    /// Picture ID the browsers see.
    pub out_pid: u16,
    /// A one-byte `show_existing_frame` filler for a layer frame the encoder dropped
    /// (docs/codec.md "Frame dropping on, with fillers"): it refreshes nothing, and at the top of
    /// a picture it would show an older picture again, so browsers get it only below the top.
    pub filler: bool,
    /// The pictures its descriptor references at this spatial layer (upstream IDs, fillers
    /// resolved: [`Gate::browser_refs`]); empty for a switch point.
    pub refs: Vec<u64>,
}

impl Frame {
    /// A filler that browsers may go without: later frames' references skip it (to its own
    /// references), so it can be left out at the top of a picture. A filler with no references
    /// (in a key picture, if libvpx ever dropped a layer frame there) is kept: nothing would
    /// stand in for it in the references after it.
    pub fn skippable(&self) -> bool {
        self.filler && !self.refs.is_empty()
    }
}

#[derive(Debug)]
struct RawPart {
    desc: PayloadDescriptor,
    data_at: usize,
    bytes: Vec<u8>,
    timestamp: u32,
    at: Instant,
}

#[derive(Debug)]
enum Status {
    Pending,
    Released(Frame),
    Lost,
}

#[derive(Debug)]
struct Slot {
    stream: usize,
    temporal: u8,
    inter_picture: bool,
    inter_layer: bool,
    parts: BTreeMap<u64, RawPart>,
    first_at: Instant,
    last_at: Instant,
    status: Status,
    resolved_at: Instant,
}

impl Slot {
    fn placeholder(stream: usize, temporal: u8, now: Instant) -> Slot {
        Slot {
            stream,
            temporal,
            inter_picture: true,
            inter_layer: false,
            parts: BTreeMap::new(),
            first_at: now,
            last_at: now,
            status: Status::Pending,
            resolved_at: now,
        }
    }

    /// Parts B..E with consecutive sequence numbers.
    fn complete(&self) -> bool {
        let mut it = self.parts.iter();
        let Some((&first, p0)) = it.next() else {
            return false;
        };
        if !p0.desc.start {
            return false;
        }
        if p0.desc.end {
            return true;
        }
        for ((&seq, p), expect) in it.zip(first + 1..) {
            if seq != expect || p.desc.start {
                return false;
            }
            if p.desc.end {
                return true;
            }
        }
        false
    }
}

/// Counters of the gate (raw, never reset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GateStats {
    pub packets: u64,
    pub bytes: u64,
    /// Not RTP, not VP9, unknown stream, or a descriptor that does not parse.
    pub malformed: u64,
    /// Another payload type (repair) or no payload (padding).
    pub ignored: u64,
    pub duplicates: u64,
    /// For a frame already resolved or older than the history.
    pub late: u64,
    pub frames_released: u64,
    pub frames_lost: u64,
    pub key_pictures: u64,
}

/// 16- or 15-bit counter unwrapped to a monotone u64 around the newest value.
#[derive(Debug, Clone, Copy, Default)]
struct Unwrap {
    newest: Option<u64>,
}

impl Unwrap {
    fn unwrap(&mut self, v: u64, bits: u32) -> u64 {
        let m = 1u64 << bits;
        let Some(n) = self.newest else {
            let x = (m << 8) | v;
            self.newest = Some(x);
            return x;
        };
        let mut best = (n & !(m - 1)) | v;
        for cand in [best.wrapping_sub(m), best + m] {
            if cand.abs_diff(n) < best.abs_diff(n) {
                best = cand;
            }
        }
        if best > n {
            self.newest = Some(best);
        }
        best
    }
}

/// The frame gate of one session's video track.
#[derive(Debug)]
pub struct Gate {
    layout: VideoLayout,
    conf: GateConfig,
    pid: Unwrap,
    seq: Vec<Unwrap>,
    stream_newest: Vec<Option<u64>>,
    slots: BTreeMap<(u64, u8), Slot>,
    /// Key pictures: a picture's position in the picture group is counted from the latest
    /// key at or before it.
    anchors: BTreeSet<u64>,
    /// Frames of pictures below this were dropped from the history.
    evicted_below: u64,
    continuity: Continuity,
    /// Spatial layers whose chain is broken until their next switch point.
    broken: u8,
    events: VecDeque<GateEvent>,
    stats: GateStats,
}

impl Gate {
    pub fn new(layout: VideoLayout, conf: GateConfig, continuity: Continuity) -> Gate {
        let n = layout.streams.len();
        Gate {
            layout,
            conf,
            pid: Unwrap::default(),
            seq: vec![Unwrap::default(); n],
            stream_newest: vec![None; n],
            slots: BTreeMap::new(),
            anchors: BTreeSet::new(),
            evicted_below: 0,
            continuity,
            broken: 0,
            events: VecDeque::new(),
            stats: GateStats::default(),
        }
    }

    pub fn layout(&self) -> &VideoLayout {
        &self.layout
    }

    pub fn stats(&self) -> GateStats {
        self.stats
    }

    /// The output continuity state (to carry it over to the gate of a restarted session).
    pub fn continuity(&self) -> Continuity {
        self.continuity
    }

    /// Whether a key picture has been seen (before it nothing is released).
    pub fn synced(&self) -> bool {
        !self.anchors.is_empty()
    }

    /// The newest picture ID seen.
    pub fn newest_pid(&self) -> Option<u64> {
        self.pid.newest
    }

    /// The highest spatial layer `s` such that layers `0..=s` all have an intact chain; None
    /// when the base layer is broken (only a key picture helps then).
    pub fn intact_top(&self) -> Option<u8> {
        let n = (0..self.layout.spatial)
            .take_while(|s| self.broken & (1 << s) == 0)
            .count();
        (n > 0).then(|| n as u8 - 1)
    }

    /// Whether spatial layer 0's chain is intact (else only a key picture helps).
    pub fn base_intact(&self) -> bool {
        self.broken & 1 == 0
    }

    /// The released frame `(pid, spatial)`.
    pub fn frame(&self, pid: u64, spatial: u8) -> Option<&Frame> {
        match &self.slots.get(&(pid, spatial))?.status {
            Status::Released(f) => Some(f),
            _ => None,
        }
    }

    /// Whether `(pid, spatial)` is resolved as lost (or was never going to come).
    pub fn is_lost(&self, pid: u64, spatial: u8) -> bool {
        matches!(
            self.slots.get(&(pid, spatial)).map(|s| &s.status),
            Some(Status::Lost)
        )
    }

    /// Whether picture `pid` fell out of the history (its frames are gone, whatever they were).
    pub fn is_gone(&self, pid: u64) -> bool {
        pid < self.evicted_below
    }

    /// Whether frame `(pid, spatial)` has started arriving, and if so whether it is a switch
    /// point (P = 0).
    pub fn started_switch_point(&self, pid: u64, spatial: u8) -> Option<bool> {
        let slot = self.slots.get(&(pid, spatial))?;
        match &slot.status {
            Status::Released(f) => Some(f.switch_point),
            Status::Pending if !slot.parts.is_empty() => Some(!slot.inter_picture),
            _ => None,
        }
    }

    /// The pictures picture `pid` references by the picture group (empty for a key picture);
    /// None before the first key picture.
    pub fn picture_refs(&self, pid: u64) -> Option<Vec<u64>> {
        let apid = self.anchor_for(pid)?;
        if apid == pid {
            return Some(Vec::new());
        }
        let e = self.layout.gof_entry(pid - apid)?;
        Some(
            e.p_diffs
                .iter()
                .filter_map(|&d| pid.checked_sub(d as u64))
                .collect(),
        )
    }

    /// Temporal id of a picture, from the picture group and the key anchor.
    pub fn temporal_of(&self, pid: u64) -> Option<u8> {
        let apid = self.anchor_for(pid)?;
        self.layout.gof_entry(pid - apid).map(|e| e.tid)
    }

    /// Pictures (ascending) that have a released spatial-0 frame, from `from` on.
    pub fn released_pictures(&self, from: u64) -> impl Iterator<Item = u64> + '_ {
        self.slots
            .range((from, 0)..)
            .filter(|((_, s), slot)| *s == 0 && matches!(slot.status, Status::Released(_)))
            .map(|((p, _), _)| *p)
    }

    pub fn poll_event(&mut self) -> Option<GateEvent> {
        self.events.pop_front()
    }

    /// One upstream RTP packet of stream `stream` (the cumulative layer index) arrived.
    pub fn push(&mut self, now: Instant, stream: usize, rtp: &[u8]) {
        self.stats.packets += 1;
        self.stats.bytes += rtp.len() as u64;
        let Some(seq_unwrap) = self.seq.get_mut(stream) else {
            self.stats.malformed += 1;
            return;
        };
        let Ok(pkt) = RtpPacket::parse(rtp) else {
            self.stats.malformed += 1;
            return;
        };
        if pkt.payload_type() != self.layout.payload_type || pkt.payload().is_empty() {
            self.stats.ignored += 1;
            return;
        }
        let Ok((desc, dlen)) = PayloadDescriptor::parse(pkt.payload()) else {
            self.stats.malformed += 1;
            return;
        };
        if desc.flexible || desc.picture_id.is_none() || dlen >= pkt.payload().len() {
            self.stats.malformed += 1;
            return;
        }
        let cell = match desc.layer {
            Some(l) => Cell {
                spatial: l.sid,
                temporal: l.tid,
            },
            None => Cell {
                spatial: 0,
                temporal: 0,
            },
        };
        if cell.spatial >= self.layout.spatial
            || cell.temporal >= self.layout.temporal
            || (!self.layout.single_stream() && self.layout.streams[stream] != cell)
        {
            self.stats.malformed += 1;
            return;
        }
        let seq = seq_unwrap.unwrap(pkt.sequence_number() as u64, 16);
        let raw_pid = desc.picture_id.unwrap_or(0) as u64;
        let bits = if desc.long_picture_id { 15 } else { 7 };
        let pid = self.pid.unwrap(raw_pid, bits);
        if pid < self.evicted_below {
            self.stats.late += 1;
            return;
        }
        if let Some(ss) = &desc.ss {
            self.layout.adopt_ss(ss);
        }
        let newest = &mut self.stream_newest[stream];
        if newest.is_none_or(|n| pid > n) {
            *newest = Some(pid);
        }
        let key = (pid, cell.spatial);
        let started;
        {
            let slot = self
                .slots
                .entry(key)
                .or_insert_with(|| Slot::placeholder(stream, cell.temporal, now));
            if !matches!(slot.status, Status::Pending) {
                self.stats.late += 1;
                return;
            }
            if slot.parts.contains_key(&seq) {
                self.stats.duplicates += 1;
                return;
            }
            started = slot.parts.is_empty();
            slot.stream = stream;
            slot.temporal = cell.temporal;
            slot.inter_picture = desc.inter_picture;
            slot.inter_layer = desc.layer.is_some_and(|l| l.inter_layer);
            if started {
                slot.first_at = now;
            }
            slot.last_at = now;
            slot.parts.insert(
                seq,
                RawPart {
                    desc: desc.clone(),
                    data_at: dlen,
                    bytes: pkt.payload().to_vec(),
                    timestamp: pkt.timestamp(),
                    at: now,
                },
            );
        }
        if !desc.inter_picture && cell.spatial == 0 && desc.start {
            self.on_key(pid);
        }
        if started && self.anchor_for(pid).is_some() {
            self.events.push_back(GateEvent::Started {
                pid,
                spatial: cell.spatial,
                switch_point: !desc.inter_picture,
            });
        }
        self.resolve(now);
        self.evict(now);
    }

    /// The key picture at or before `pid`.
    fn anchor_for(&self, pid: u64) -> Option<u64> {
        self.anchors.range(..=pid).next_back().copied()
    }

    fn latest_anchor(&self) -> Option<u64> {
        self.anchors.last().copied()
    }

    /// A key picture starts: the picture group restarts from it.
    fn on_key(&mut self, pid: u64) {
        if !self.anchors.insert(pid) {
            return;
        }
        self.stats.key_pictures += 1;
        if self.latest_anchor() == Some(pid) {
            self.broken = 0;
        }
    }

    /// The frames `(pid, s)` references, or None if it cannot be known (before the first key).
    fn refs_of(&self, pid: u64, s: u8, slot: &Slot) -> Option<Vec<(u64, u8, u8)>> {
        let mut v = Vec::with_capacity(3);
        if s > 0 && slot.inter_layer {
            v.push((pid, s - 1, slot.temporal));
        }
        if slot.inter_picture {
            let apid = self.anchor_for(pid)?;
            let e = self.layout.gof_entry(pid - apid)?;
            for &d in &e.p_diffs {
                let r = pid.checked_sub(d as u64)?;
                let rt = self.temporal_of(r)?;
                v.push((r, s, rt));
            }
        }
        Some(v)
    }

    /// The pictures whose layer-`s` frames frame `(pid, s)` is told to reference in the
    /// browser's flexible-mode descriptor (newest first, at most 3, within 127 pictures): its
    /// references by the picture group, each filler among them replaced by what the filler
    /// itself references. A filler refreshes no decoder buffer, so what a later frame really
    /// predicts from is the frame the filler stood in for; and a browser that had the filler
    /// left out (at the top of its picture, `Forwarder`) must not be told to wait for it.
    /// Empty for a switch point (P = 0). Its references are released (`decide`), so their
    /// own resolved references are known.
    fn browser_refs(&self, pid: u64, s: u8, slot: &Slot) -> Vec<u64> {
        if !slot.inter_picture {
            return Vec::new();
        }
        let by_group = self.picture_refs(pid).unwrap_or_default();
        let mut v: Vec<u64> = Vec::with_capacity(3);
        for &r in &by_group {
            match self.frame(r, s) {
                Some(f) if f.skippable() => v.extend_from_slice(&f.refs),
                _ => v.push(r),
            }
        }
        v.retain(|&r| r < pid && pid - r <= 127);
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.dedup();
        v.truncate(3);
        if v.is_empty() {
            // Cannot happen for a stream that follows its picture group; the descriptor
            // still needs a reference, and the group's is the one the encoder meant.
            v = by_group
                .into_iter()
                .filter(|&r| r < pid && pid - r <= 127)
                .take(3)
                .collect();
        }
        v
    }

    /// Settle every pending frame that can be settled now.
    fn resolve(&mut self, now: Instant) {
        loop {
            let mut changed = false;
            let keys: Vec<(u64, u8)> = self
                .slots
                .iter()
                .filter(|(_, s)| matches!(s.status, Status::Pending))
                .map(|(k, _)| *k)
                .collect();
            for (pid, s) in keys {
                match self.decide(now, pid, s) {
                    Decision::Wait => {}
                    Decision::Release => {
                        self.release(now, pid, s);
                        changed = true;
                    }
                    Decision::Lose => {
                        self.lose(now, pid, s);
                        changed = true;
                    }
                }
            }
            if !changed {
                return;
            }
        }
    }

    fn decide(&mut self, now: Instant, pid: u64, s: u8) -> Decision {
        let Some(slot) = self.slots.get(&(pid, s)) else {
            return Decision::Wait;
        };
        if self.anchor_for(pid).is_none() {
            // Before the first key picture nothing can be decoded.
            return if now >= slot.last_at + self.conf.frame_timeout {
                Decision::Lose
            } else {
                Decision::Wait
            };
        };
        if !slot.complete() {
            let moved_on = self.stream_newest[slot.stream].is_some_and(|n| n > pid);
            let late = now >= slot.last_at + self.conf.frame_timeout
                || now >= slot.first_at + self.conf.frame_max
                || (moved_on && now >= slot.last_at + self.conf.reorder_grace);
            return if late { Decision::Lose } else { Decision::Wait };
        }
        let Some(refs) = self.refs_of(pid, s, slot) else {
            return Decision::Lose;
        };
        let mut wait = false;
        for (r, rs, rt) in refs {
            if r < self.evicted_below {
                return Decision::Lose;
            }
            match self.slots.get(&(r, rs)).map(|x| &x.status) {
                Some(Status::Released(_)) => {}
                Some(Status::Lost) => return Decision::Lose,
                Some(Status::Pending) => wait = true,
                None => {
                    // Nothing of the reference arrived yet: track it, so that it is declared
                    // lost like any incomplete frame once its stream has moved on.
                    let stream = self
                        .layout
                        .stream_of(Cell {
                            spatial: rs,
                            temporal: rt,
                        })
                        .unwrap_or(0);
                    self.slots
                        .insert((r, rs), Slot::placeholder(stream, rt, now));
                    wait = true;
                }
            }
        }
        if wait {
            Decision::Wait
        } else {
            Decision::Release
        }
    }

    fn release(&mut self, now: Instant, pid: u64, s: u8) {
        let key = self.anchors.contains(&pid);
        let Some((ts0, filler, refs)) = self.slots.get(&(pid, s)).and_then(|x| {
            let p = x.parts.values().next()?;
            let filler = x.parts.len() == 1 && is_filler(&p.bytes[p.data_at..]);
            Some((p.timestamp, filler, self.browser_refs(pid, s, x)))
        }) else {
            return;
        };
        let p_diffs: Vec<u8> = refs.iter().map(|&r| (pid - r) as u8).collect();
        self.continuity.base(pid, ts0);
        let out_pid = self.continuity.out_pid(pid);
        let ss = (key && s == 0).then(|| self.layout.scalability_structure());
        let Some(slot) = self.slots.get_mut(&(pid, s)) else {
            return;
        };
        let parts = std::mem::take(&mut slot.parts);
        let mut packets = Vec::with_capacity(parts.len());
        let mut bytes = 0;
        let mut completed_at = slot.first_at;
        let mut first = true;
        for (_, p) in parts {
            let out = OutFields {
                pid: out_pid,
                spatial: s,
                temporal: slot.temporal,
                p_diffs: &p_diffs,
                ss: if first { ss.clone() } else { None },
            };
            first = false;
            let Ok(payload) = browser_payload(&p.desc, &p.bytes[p.data_at..], &out) else {
                // Only an out-of-range field could fail; the input was validated at push.
                slot.status = Status::Lost;
                slot.resolved_at = now;
                self.stats.frames_lost += 1;
                self.events.push_back(GateEvent::Lost { pid, spatial: s });
                return;
            };
            bytes += payload.len();
            completed_at = completed_at.max(p.at);
            packets.push(OutPacket {
                payload,
                timestamp: self.continuity.out_ts(p.timestamp),
                at: p.at,
            });
        }
        if slot.temporal == 0 && !slot.inter_picture {
            self.broken &= !(1u8 << s);
        }
        slot.status = Status::Released(Frame {
            temporal: slot.temporal,
            switch_point: !slot.inter_picture,
            key,
            packets,
            bytes,
            completed_at,
            out_pid,
            filler,
            refs,
        });
        slot.resolved_at = now;
        self.continuity.saw(pid, ts0);
        self.stats.frames_released += 1;
        self.events
            .push_back(GateEvent::Released { pid, spatial: s });
    }

    fn lose(&mut self, now: Instant, pid: u64, s: u8) {
        let current = self.latest_anchor().is_some_and(|a| pid >= a);
        let Some(slot) = self.slots.get_mut(&(pid, s)) else {
            return;
        };
        slot.parts.clear();
        slot.status = Status::Lost;
        slot.resolved_at = now;
        // A lost TL0 frame breaks its layer (and every layer above, which predicts from it)
        // until the layer's next switch point; TL1/TL2 losses only cost the pictures that
        // reference them, which the references rule already handles.
        if slot.temporal == 0 && current {
            for l in s..self.layout.spatial {
                self.broken |= 1 << l;
            }
        }
        self.stats.frames_lost += 1;
        if self.anchor_for(pid).is_some() {
            self.events.push_back(GateEvent::Lost { pid, spatial: s });
        }
    }

    fn evict(&mut self, now: Instant) {
        let horizon = now.checked_sub(self.conf.history);
        while let Some((&(pid, s), slot)) = self.slots.iter().next() {
            let resolved = !matches!(slot.status, Status::Pending);
            let old = horizon.is_some_and(|h| slot.resolved_at < h);
            let over = self.slots.len() > self.conf.max_frames;
            if !(over || (resolved && old)) {
                break;
            }
            if !resolved {
                self.lose(now, pid, s);
            }
            self.slots.remove(&(pid, s));
            self.evicted_below = self.evicted_below.max(pid);
        }
        // Keep the key pictures still needed to place the frames in the history.
        while let Some(&second) = self.anchors.iter().nth(1) {
            if second > self.evicted_below {
                break;
            }
            self.anchors.pop_first();
        }
    }

    /// Settle frames whose deadline passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.resolve(now);
        self.evict(now);
    }

    /// The next instant at which a pending frame's fate changes by time alone.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.slots
            .iter()
            .filter(|(_, s)| matches!(s.status, Status::Pending))
            .map(|(&(pid, _), s)| {
                let timeout =
                    (s.last_at + self.conf.frame_timeout).min(s.first_at + self.conf.frame_max);
                if self.stream_newest[s.stream].is_some_and(|n| n > pid) {
                    timeout.min(s.last_at + self.conf.reorder_grace)
                } else {
                    timeout
                }
            })
            .min()
    }
}

enum Decision {
    Wait,
    Release,
    Lose,
}

#[cfg(test)]
mod tests;
