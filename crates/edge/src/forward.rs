//! One browser's video forwarding: which released frames it gets, in which order, where its
//! switch points are and where each picture ends (the RTP marker).
//!
//! The browser sees one RTP stream; libwebrtc assembles a frame from consecutive sequence
//! numbers and a picture ("temporal unit") from the frames of one timestamp up to the one with
//! the marker bit, and decodes a picture only once that marker arrived and everything it
//! references was decoded. So a picture is sent whole, in picture order, once every frame
//! planned for it is settled: its spatial frames `0..=k` go out back to back with the marker on
//! the last packet of `k`, the top frame actually available. Holding a picture's lower frames
//! until its top frame is settled costs the browser nothing: it could not decode the picture
//! before its top frame anyway.
//!
//! Switching (RFC 9628 switch points):
//! * temporal down at once; temporal up on a TL0 picture (every later picture references only
//!   pictures from it on), or one layer up on a picture whose references are all in layers the
//!   browser already has;
//! * spatial down at once (at the next picture); spatial up only on a picture whose new upper
//!   frames have P = 0 (key picture or spatial-layer sync): known from their first packet.

use crate::gate::{Frame, Gate, GateEvent};
use crate::keycache::Chain;
use crate::select::Choice;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// One packet to write to the browser's video stream, in order.
#[derive(Debug, Clone)]
pub struct Send {
    pub payload: Arc<[u8]>,
    pub timestamp: u32,
    pub marker: bool,
    /// Arrival of the packet at the edge (the writer's wallclock).
    pub at: Instant,
    /// Upstream picture and spatial layer.
    pub pid: u64,
    pub spatial: u8,
    /// On a frame's last packet: when the frame was complete at the edge (the latency
    /// measurement's start).
    pub frame_done: Option<Instant>,
    /// A packet of a key picture.
    pub key: bool,
}

/// A picture the browser takes, waiting for its frames to settle.
#[derive(Debug, Clone, Copy)]
struct Tu {
    /// Highest spatial layer planned (the target when the base frame was released).
    plan: u8,
    temporal: u8,
    key: bool,
}

/// Counters of one browser's forwarding (raw, never reset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardStats {
    pub pictures: u64,
    pub frames: u64,
    pub packets: u64,
    pub bytes: u64,
    /// Pictures skipped for their temporal layer or because their base frame was lost.
    pub pictures_skipped: u64,
    pub spatial_up: u64,
    pub spatial_down: u64,
    pub temporal_up: u64,
    pub temporal_down: u64,
    /// Encoder fillers left out at the top of a picture (`Forwarder::emit_picture`).
    pub fillers_left_out: u64,
    /// Starts from the key-picture cache, and the pictures sent in those chains.
    pub cache_starts: u64,
    pub cache_pictures: u64,
}

/// The forwarding state of one browser.
#[derive(Debug, Clone)]
pub struct Forwarder {
    spatial_layers: u8,
    started: bool,
    s_cur: u8,
    t_cur: u8,
    target: Choice,
    open: BTreeMap<u64, Tu>,
    /// Pictures taken recently (for the temporal references of later ones).
    taken: BTreeSet<u64>,
    /// Newest picture sent.
    last_pid: Option<u64>,
    out: VecDeque<Send>,
    stats: ForwardStats,
}

impl Forwarder {
    pub fn new(spatial_layers: u8, target: Choice) -> Self {
        Forwarder {
            spatial_layers,
            started: false,
            s_cur: 0,
            t_cur: 0,
            target,
            open: BTreeMap::new(),
            taken: BTreeSet::new(),
            last_pid: None,
            out: VecDeque::new(),
            stats: ForwardStats::default(),
        }
    }

    pub fn stats(&self) -> ForwardStats {
        self.stats
    }

    /// Whether the browser has been sent a key picture (it can decode).
    pub fn started(&self) -> bool {
        self.started
    }

    /// The layers the browser currently decodes.
    pub fn current(&self) -> Choice {
        Choice {
            spatial: self.s_cur,
            temporal: self.t_cur,
        }
    }

    pub fn target(&self) -> Choice {
        self.target
    }

    pub fn set_target(&mut self, c: Choice) {
        self.target = c;
    }

    /// The session restarted upstream (a new picture-ID space): forget the old pictures and
    /// wait for a key picture (or a cache start). The layers stay as they were.
    pub fn restart(&mut self) {
        self.started = false;
        self.open.clear();
        self.taken.clear();
        self.last_pid = None;
    }

    /// The newest picture sent.
    pub fn last_pid(&self) -> Option<u64> {
        self.last_pid
    }

    pub fn poll_send(&mut self) -> Option<Send> {
        self.out.pop_front()
    }

    /// Starts the browser with a chain from the key-picture cache (key picture + TL0 pictures,
    /// spatial layers `0..=s`), then continues live: TL0 pictures newer than the chain whose
    /// base frame the gate already released are planned at once.
    pub fn start_from_chain(&mut self, gate: &Gate, chain: &Chain, s: u8) {
        let Some(&(last, _)) = chain.last() else {
            return;
        };
        for (pid, frames) in chain {
            self.taken.insert(*pid);
            self.emit_picture(*pid, frames);
            self.stats.cache_pictures += 1;
        }
        self.stats.cache_starts += 1;
        self.started = true;
        self.s_cur = s;
        self.t_cur = 0;
        self.last_pid = Some(last);
        let newer: Vec<u64> = gate
            .released_pictures(last + 1)
            .filter(|&p| gate.temporal_of(p) == Some(0))
            .collect();
        for pid in newer {
            self.plan(gate, pid);
        }
        self.flush(gate);
    }

    /// A gate event of this browser's session.
    pub fn on_event(&mut self, gate: &Gate, ev: GateEvent) {
        if let GateEvent::Released { pid, spatial: 0 } = ev {
            self.plan(gate, pid);
        }
        self.flush(gate);
    }

    /// Picture `pid`'s base frame was released: decide whether this browser takes it.
    fn plan(&mut self, gate: &Gate, pid: u64) {
        if self.last_pid.is_some_and(|l| pid <= l) || self.open.contains_key(&pid) {
            return;
        }
        let Some(base) = gate.frame(pid, 0) else {
            return;
        };
        let (tid, key) = (base.temporal, base.key);
        if !self.started {
            if !key {
                return;
            }
            self.started = true;
            self.s_cur = 0;
            self.t_cur = self.target.temporal;
        }
        if self.target.temporal < self.t_cur {
            self.t_cur = self.target.temporal;
            self.stats.temporal_down += 1;
        }
        // A picture is taken only if every picture it references was: then raising the
        // temporal layer here is a valid switch (TL0 pictures and key pictures always are).
        if !key && !self.refs_taken(gate, pid) {
            self.stats.pictures_skipped += 1;
            return;
        }
        if tid > self.t_cur {
            if tid > self.target.temporal {
                self.stats.pictures_skipped += 1;
                return;
            }
            self.t_cur = tid;
            self.stats.temporal_up += 1;
        } else if tid == 0 && self.target.temporal > self.t_cur {
            self.t_cur = self.target.temporal;
            self.stats.temporal_up += 1;
        }
        let intact = gate.intact_top().unwrap_or(0);
        let plan = self
            .target
            .spatial
            .min(intact)
            .min(self.spatial_layers.saturating_sub(1));
        self.taken.insert(pid);
        while self.taken.len() > 64 {
            self.taken.pop_first();
        }
        self.open.insert(
            pid,
            Tu {
                plan,
                temporal: tid,
                key,
            },
        );
    }

    /// Whether every picture `pid` references (by the picture group) was taken.
    fn refs_taken(&self, gate: &Gate, pid: u64) -> bool {
        gate.picture_refs(pid)
            .is_some_and(|refs| refs.iter().all(|r| self.taken.contains(r)))
    }

    /// Sends every settled picture at the head of the queue, in order.
    ///
    /// Which spatial frames a picture gets is decided here, with the layers the browser has
    /// after the pictures before it: a frame above them only if it is a switch point (P = 0),
    /// which the encoder places on key and TL0 pictures only; a settled picture ends at its
    /// first frame that is lost, not joinable or beyond the plan.
    fn flush(&mut self, gate: &Gate) {
        while let Some((&pid, &tu)) = self.open.iter().next() {
            let mut allowed = tu.plan;
            if !tu.key && tu.temporal != 0 {
                allowed = allowed.min(self.s_cur);
            }
            let mut top = None;
            let mut waiting = false;
            for s in 0..=allowed {
                let joinable = |sp: bool| s <= self.s_cur || tu.key || sp;
                if let Some(f) = gate.frame(pid, s) {
                    // A filler is no switch point whatever its P: it shows an older frame of
                    // a layer the browser does not have yet.
                    if !joinable(f.switch_point && !f.filler) {
                        break;
                    }
                    top = Some(s);
                } else if gate.is_lost(pid, s)
                    || gate.is_gone(pid)
                    || gate
                        .started_switch_point(pid, s)
                        .is_some_and(|sp| !joinable(sp))
                {
                    break;
                } else {
                    waiting = true;
                    break;
                }
            }
            if waiting {
                return;
            }
            self.open.remove(&pid);
            let Some(top) = top else {
                self.stats.pictures_skipped += 1;
                self.taken.remove(&pid);
                continue;
            };
            let frames: Vec<Frame> = (0..=top)
                .filter_map(|s| gate.frame(pid, s).cloned())
                .collect();
            self.emit_picture(pid, &frames);
            if top > self.s_cur {
                self.stats.spatial_up += 1;
            } else if top < self.s_cur {
                self.stats.spatial_down += 1;
            }
            self.s_cur = top;
            self.last_pid = Some(pid);
        }
    }

    /// Sends a picture's frames `0..=k` (spatial order), the marker on its last one, leaving
    /// out the encoder's fillers at the top: decoded there, a filler shows its layer's newest
    /// reference frame, older than the picture before it after TL2 pictures (the browser saw
    /// its picture jump back), and nothing refreshed by it is missed (later frames reference
    /// what it stood in for, `Gate::browser_refs`). The browser then decodes the picture at its
    /// highest coded layer; a picture of fillers alone is not sent (the one before stays up a
    /// frame longer). The layers the browser holds do not change.
    fn emit_picture(&mut self, pid: u64, frames: &[Frame]) {
        let coded = frames
            .iter()
            .rposition(|f| !f.skippable())
            .map_or(0, |i| i + 1);
        self.stats.fillers_left_out += (frames.len() - coded) as u64;
        if coded == 0 {
            self.stats.pictures_skipped += 1;
            return;
        }
        for (s, f) in frames[..coded].iter().enumerate() {
            self.emit(pid, s as u8, f, s + 1 == coded);
        }
        self.stats.pictures += 1;
    }

    fn emit(&mut self, pid: u64, spatial: u8, f: &Frame, top: bool) {
        let n = f.packets.len();
        for (i, p) in f.packets.iter().enumerate() {
            self.out.push_back(Send {
                payload: p.payload.clone(),
                timestamp: p.timestamp,
                marker: top && i + 1 == n,
                at: p.at,
                pid,
                spatial,
                frame_done: (i + 1 == n).then_some(f.completed_at),
                key: f.key,
            });
            self.stats.packets += 1;
            self.stats.bytes += p.payload.len() as u64;
        }
        self.stats.frames += 1;
    }
}

#[cfg(test)]
mod tests;
