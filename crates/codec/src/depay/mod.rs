//! Depacketizer and picture assembler for a receiver holding cumulative layers 0..=k.
//!
//! Sans-IO: feed RTP packets with [`Assembler::push`] (tagged with the layer/stream they came
//! from), take pictures with [`Assembler::pop`]. It never reads a clock: a picture that is not
//! complete is given up once `reorder_pictures` newer pictures have been seen, or on
//! [`Assembler::flush`].
//!
//! What it guarantees: every picture it returns is decodable — each kept layer frame is
//! complete (B..E with no sequence gap) and its whole reference chain was returned before
//! (references from the SS picture group in non-flexible mode, from P_DIFFs in flexible mode,
//! the lower spatial layer of the same picture when D = 1). Frames whose chain is broken are
//! skipped, and counted, until the next switch point (key picture, spatial-layer sync with
//! P = 0). Layer frames above the subscription are ignored, so the end of picture for a partial
//! subscriber is the last kept frame, whatever the marker bits say.

mod judge;
#[cfg(test)]
mod l2t1_tests;
mod pending;
#[cfg(test)]
mod prop;
mod release;
mod unwrap;

use crate::error::{Error, Result};
use crate::ladder::LayerLadder;
use crate::rtp::RtpPacket;
use crate::superframe;
use crate::vp9rtp::{GofEntry, LayerIndices, PayloadDescriptor};
use pending::{Part, PendingFrame, PendingPicture};
use proto::wire::frames_ext;
use std::collections::{BTreeMap, HashSet};
use unwrap::Unwrapper;

/// Tuning for the assembler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssemblerConfig {
    /// A frame missing from a picture is lost, not late, once its own layer has delivered a
    /// picture this many IDs newer (or, before that layer delivered anything, once any layer
    /// has). A whole picture missing between two others counts as lost on the same rule.
    pub reorder_pictures: u64,
    /// Longest wait for a layer that lags the others, in picture IDs behind the newest
    /// picture on any layer. Layers are paced apart, each at its own rate, so an upper
    /// layer's frames can arrive hundreds of ms after the base layer's (a key picture's
    /// upper frames are many times the layer's frame budget); a frame of a lagging layer is
    /// waited for, not given up as soon as the base layer has moved on, since giving it up
    /// breaks that layer's prediction chain until its next switch point. A layer that lags
    /// by more than this is stalled (left, or dropped by the network): it is no longer
    /// waited for.
    pub patience_pictures: u64,
    /// Hard cap on pictures held; the oldest is forced out beyond it.
    pub max_pending: usize,
}

impl Default for AssemblerConfig {
    fn default() -> Self {
        AssemblerConfig {
            reorder_pictures: 4,
            patience_pictures: 24,
            max_pending: 32,
        }
    }
}

/// Counters (raw, never reset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AssemblerStats {
    pub packets: u64,
    /// Packets of layers above the subscription.
    pub ignored_layer: u64,
    /// Packets for a picture already returned or given up.
    pub late: u64,
    pub duplicates: u64,
    /// Packets that failed to parse or contradict the ladder.
    pub malformed: u64,
    pub pictures: u64,
    /// Pictures with no decodable frame (base layer lost or its chain broken).
    pub pictures_skipped: u64,
    /// Layer frames not returned because incomplete.
    pub frames_incomplete: u64,
    /// Layer frames complete but with a broken reference chain.
    pub frames_unreferenceable: u64,
    /// Pictures the host released before their upper frames' repair came
    /// ([`Assembler::release_oldest`]).
    pub released_unrepaired: u64,
    /// Top layer frames left out because the encoder had dropped them
    /// ([`AssembledPicture::trim_fillers`]).
    pub filler_frames: u64,
    /// Pictures the encoder dropped whole (every frame a filler): not returned.
    pub filler_pictures: u64,
}

/// One layer frame as assembled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembledFrame {
    pub spatial: u8,
    pub temporal: u8,
    pub data: Vec<u8>,
}

/// A decodable picture: the kept frames, lowest spatial layer first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembledPicture {
    /// Extended (unwrapped) picture ID.
    pub picture_id: u64,
    pub timestamp: u32,
    pub temporal: u8,
    /// A key picture (spatial layer 0 intra).
    pub key: bool,
    pub frames: Vec<AssembledFrame>,
    /// Whether every frame the subscription expects for this picture is present.
    pub complete: bool,
}

impl AssembledPicture {
    /// The access unit for the decoder: kept frames with a rebuilt superframe index.
    pub fn access_unit(&self) -> Result<Vec<u8>> {
        let refs: Vec<&[u8]> = self.frames.iter().map(|f| &f.data[..]).collect();
        let mut out = Vec::new();
        superframe::build(&refs, &mut out)?;
        Ok(out)
    }
    /// Highest spatial layer present.
    pub fn top_spatial(&self) -> u8 {
        self.frames.last().map_or(0, |f| f.spatial)
    }

    /// Leaves out the top frames that stand in for layer frames the encoder dropped (a
    /// one-byte `show_existing_frame`, `codec::vpx::filler_frame`), and returns how many. Such
    /// a frame refreshes nothing, so the decoder's state is the same without it; decoded, it
    /// would show its layer's last *reference* frame, a picture up to a temporal period older
    /// than the one shown before it (the viewer saw time jump back at every dropped TL0 frame
    /// of the top layer). Without it the decoder outputs this picture's highest coded layer.
    /// Only the top is trimmed: a filler below a coded frame does not decide the output.
    pub fn trim_fillers(&mut self) -> usize {
        let n = self.frames.len();
        while self.frames.last().is_some_and(|f| is_filler(&f.data)) {
            self.frames.pop();
        }
        n - self.frames.len()
    }
}

/// A frame that only shows an existing reference buffer again: the whole frame is the
/// uncompressed header's first byte (profile 0 or 1) or two (profile 2 or 3, the reserved
/// bit), `show_existing_frame` set. Coded frames are never this short.
pub fn is_filler(frame: &[u8]) -> bool {
    frame.len() <= 2 && crate::superframe::frame_info(frame).is_ok_and(|i| i.show_existing)
}

/// A layer's state since the assembler joined it (`missing_given_up` reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// Held from the start, or not held: judged by the usual late/lost rules.
    Held,
    /// Joined by [`Assembler::set_top_layer`], no packet since: pictures do not wait for it.
    Awaiting,
    /// Joined, its first packet was of this picture: older pictures do not wait for it.
    From(u64),
}

/// Picture assembler for layers 0..=k of one session.
#[derive(Debug, Clone)]
pub struct Assembler {
    ladder: LayerLadder,
    conf: AssemblerConfig,
    top_layer: Option<usize>,
    seq: Vec<Unwrapper>,
    pid: Unwrapper,
    pending: BTreeMap<u64, PendingPicture>,
    newest: Option<u64>,
    /// Newest picture ID each layer has delivered a packet of.
    newest_on: Vec<Option<u64>>,
    /// Where each layer stands since [`Self::set_top_layer`] last joined it.
    joins: Vec<Join>,
    /// Pictures below this ID are done (returned or given up).
    done_below: u64,
    /// The first picture returned: references older than it are not known to be missing
    /// (the stream's start, where packets of later pictures come first).
    first_returned: Option<u64>,
    decoded: HashSet<(u8, u64)>,
    /// Picture IDs the sender marked as sent with no frame at all (not waited for).
    unsent: std::collections::BTreeSet<u64>,
    /// Extended picture IDs of TL0 pictures seen (each opens a picture group).
    tl0_pids: std::collections::BTreeSet<u64>,
    gof: Vec<GofEntry>,
    resolutions: Vec<(u16, u16)>,
    ready: std::collections::VecDeque<AssembledPicture>,
    stats: AssemblerStats,
    /// A TL0 picture was skipped after decoding began, and no key picture since.
    base_broken: bool,
    /// The last time that happened, and why ([`Assembler::last_base_break`]).
    last_base_break: Option<BaseBreak>,
}

/// Why a temporal-layer-0 picture had no decodable base frame (which breaks the base layer's
/// chain until a key picture): for the host's log, so that a break no loss explains can be
/// told from one a loss does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseBreak {
    /// Extended picture ID of the picture skipped.
    pub picture_id: u64,
    /// `missing` (no packet of its base frame), `incomplete` (a packet of it missing),
    /// `not sent` (the sender marked it so), `unreferenceable` (a reference in `refs` was not
    /// decoded), `no references` (its references are not known: no picture group, or its
    /// TID is not the group's at its position).
    pub reason: &'static str,
    /// Its base frame's references, when known.
    pub refs: Vec<u64>,
    /// Count of such breaks so far.
    pub count: u64,
}

impl Assembler {
    /// New assembler holding layers 0..=`top_layer` (None: nothing yet).
    pub fn new(ladder: LayerLadder, top_layer: Option<usize>, conf: AssemblerConfig) -> Self {
        let n = ladder.len();
        // The picture group follows from the ladder (libvpx's built-in patterns); an SS
        // describing the full structure overrides it.
        let gof = crate::vp9rtp::gof_for_temporal_layers(ladder.temporal_layers() as usize);
        Assembler {
            ladder,
            conf,
            top_layer: top_layer.map(|k| k.min(n - 1)),
            seq: vec![Unwrapper::default(); n],
            pid: Unwrapper::default(),
            pending: BTreeMap::new(),
            newest: None,
            newest_on: vec![None; n],
            joins: vec![Join::Held; n],
            done_below: 0,
            first_returned: None,
            decoded: HashSet::new(),
            tl0_pids: Default::default(),
            unsent: Default::default(),
            gof,
            resolutions: Vec::new(),
            ready: Default::default(),
            stats: AssemblerStats::default(),
            base_broken: false,
            last_base_break: None,
        }
    }

    /// The last time a temporal-layer-0 picture broke the base layer's chain, and why.
    pub fn last_base_break(&self) -> Option<&BaseBreak> {
        self.last_base_break.as_ref()
    }

    /// Whether the base layer's chain is broken: a temporal-layer-0 picture had no decodable
    /// base frame after decoding began (its packets lost beyond repair), and no key picture
    /// has come since. Until one does, every picture of the base layer is skipped: the host
    /// asks for a key picture.
    pub fn base_broken(&self) -> bool {
        self.base_broken
    }

    /// Counters.
    pub fn stats(&self) -> AssemblerStats {
        self.stats
    }

    /// Spatial resolutions from the last scalability structure seen.
    pub fn resolutions(&self) -> &[(u16, u16)] {
        &self.resolutions
    }

    /// Change the subscription to layers 0..=k (None: none). Frames above are dropped from
    /// pending pictures; a newly added layer is used from its next switch point.
    ///
    /// A newly added upper layer is not waited for until its first packet comes, nor for the
    /// pictures before that packet: the join takes a graft's time to reach the network, and
    /// until the layer's switch point its frames cannot be decoded anyway. Waiting for it
    /// (`reorder_pictures`, 0.5 s) held every picture back at each join.
    pub fn set_top_layer(&mut self, top: Option<usize>) {
        let old = self.top_layer;
        self.top_layer = top.map(|k| k.min(self.ladder.len() - 1));
        for k in 1..self.ladder.len() {
            let held = self.top_layer.is_some_and(|t| k <= t);
            let was = old.is_some_and(|t| k <= t);
            if !held {
                (self.newest_on[k], self.joins[k]) = (None, Join::Held);
            } else if !was {
                self.joins[k] = Join::Awaiting;
            }
        }
        let ladder = &self.ladder;
        for p in self.pending.values_mut() {
            let tid = p.tid;
            p.frames
                .retain(|&s, _| top.is_some_and(|k| ladder.keeps(k, s, tid)));
        }
    }

    /// Whether a packet with this descriptor ends the picture for a holder of layers 0..=k:
    /// the E packet of the highest spatial layer kept at this picture's TID. Relays use it to
    /// repair the RTP marker for partial subscribers.
    pub fn is_end_of_picture(ladder: &LayerLadder, k: usize, desc: &PayloadDescriptor) -> bool {
        if !desc.end {
            return false;
        }
        let tid = desc.tid();
        let top = (0..ladder.spatial_layers())
            .filter(|&s| ladder.keeps(k, s, tid))
            .max();
        top == Some(desc.sid())
    }

    /// The cumulative layer a packet of a *single* RTP stream carrying every layer belongs
    /// to (a TFMCC session sends the whole SVC encode on one group and one SSRC): its
    /// payload descriptor's layer indices (SID, TID) looked up in the ladder; a descriptor
    /// without layer indices is layer 0. `None` for a payload that does not parse or names
    /// a cell outside the ladder (the caller counts it and may still [`Assembler::push`] it
    /// as layer 0, which counts it malformed).
    pub fn layer_of_payload(ladder: &LayerLadder, payload: &[u8]) -> Option<usize> {
        let (desc, _) = PayloadDescriptor::parse(payload).ok()?;
        match desc.layer {
            None => Some(0),
            Some(l) => ladder.layer_of(l.sid, l.tid),
        }
    }

    /// The ladder in use.
    pub fn ladder(&self) -> &LayerLadder {
        &self.ladder
    }

    /// Feed one RTP packet received on the stream of cumulative layer `layer`. Malformed
    /// input is an error (and counted); the assembler state stays consistent.
    pub fn push(&mut self, layer: usize, packet: &RtpPacket<'_>) -> Result<()> {
        self.stats.packets += 1;
        let Some(top) = self.top_layer else {
            self.stats.ignored_layer += 1;
            return Ok(());
        };
        if layer >= self.ladder.len() {
            self.stats.malformed += 1;
            return Err(Error::Config(format!("layer {layer} not in ladder")));
        }
        if layer > top {
            self.stats.ignored_layer += 1;
            return Ok(());
        }
        let (desc, n) = match PayloadDescriptor::parse(packet.payload()) {
            Ok(x) => x,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e);
            }
        };
        let bad = |s: &mut Self, m: &'static str| {
            s.stats.malformed += 1;
            Err(Error::BadDescriptor(m))
        };
        let Some(pid15) = desc.picture_id else {
            return bad(self, "picture ID required");
        };
        let mut desc = desc;
        if desc.layer.is_none() {
            // Without layer indices the frame is the stream's own ladder cell.
            let Some(c) = self.ladder.cell(layer) else {
                return bad(self, "layer not in ladder");
            };
            desc.layer = Some(LayerIndices {
                tid: c.temporal,
                switch_up: false,
                sid: c.spatial,
                inter_layer: c.spatial > 0,
            });
        }
        if self.ladder.layer_of(desc.sid(), desc.tid()) != Some(layer) {
            return bad(self, "layer indices do not match the stream's layer");
        }
        let bits = if desc.long_picture_id { 15 } else { 7 };
        let pid = self.pid.unwrap(pid15 as u64, bits);
        let seq = self.seq[layer].unwrap(packet.sequence_number() as u64, 16);
        // Where this layer is, late packet or not (`missing_given_up`).
        self.newest_on[layer] = Some(self.newest_on[layer].map_or(pid, |n| n.max(pid)));
        if self.joins[layer] == Join::Awaiting {
            self.joins[layer] = Join::From(pid);
        }
        if pid < self.done_below {
            // Nothing decodable returned yet and a slightly older picture turns up: the first
            // packet seen was of a later picture. Layers are paced independently, so a higher
            // layer's packet of picture n+1 can arrive before the base layer's packets of
            // picture n, the key picture a (restarted) stream begins with; taking the first
            // packet as the start threw that key picture away as late.
            let reopen = self.stats.pictures == 0
                && self.ready.is_empty()
                && self.done_below - pid <= self.conf.reorder_pictures;
            if !reopen {
                self.stats.late += 1;
                return Ok(());
            }
            self.done_below = pid;
        }
        if let Some(ss) = &desc.ss {
            let full = ss.spatial_layers == self.ladder.spatial_layers();
            if full && !ss.gof.is_empty() {
                self.gof = ss.gof.clone();
            }
            if full && !ss.resolutions.is_empty() {
                self.resolutions = ss.resolutions.clone();
            } else if let Some(&r0) = ss.resolutions.first() {
                if self.resolutions.is_empty() {
                    self.resolutions.push(r0);
                }
                self.resolutions[0] = r0;
            }
        }
        if desc.tid() == 0 {
            self.tl0_pids.insert(pid);
        }
        if self.newest.is_none() {
            self.done_below = pid;
        }
        self.newest = Some(self.newest.map_or(pid, |n| n.max(pid)));
        let pic = self.pending.entry(pid).or_insert_with(|| PendingPicture {
            timestamp: packet.timestamp(),
            tid: desc.tid(),
            frames: BTreeMap::new(),
            sent: None,
        });
        // Every packet of a picture carries the same mark: read the first one.
        if pic.sent.is_none() {
            if let Some(Ok(f)) = packet
                .extension(frames_ext::ID)
                .map(frames_ext::SentFrames::parse)
            {
                pic.sent = Some(f);
                let from = pid
                    .saturating_sub(f.unsent_before as u64)
                    .max(self.done_below);
                self.unsent.extend(from..pid);
            }
        }
        if pic.tid != desc.tid() {
            self.stats.malformed += 1;
            return Err(Error::BadDescriptor("TID differs within a picture"));
        }
        let sid = desc.sid();
        let part = Part {
            start: desc.start,
            end: desc.end,
            data: packet.payload()[n..].to_vec(),
        };
        let frame = pic.frames.entry(sid).or_insert_with(|| PendingFrame {
            desc: desc.clone(),
            parts: BTreeMap::new(),
        });
        if desc.start {
            frame.desc = desc.clone();
        }
        if frame.parts.insert(seq, part).is_some() {
            self.stats.duplicates += 1;
        }
        self.advance(false);
        Ok(())
    }

    /// The RTP timestamp of the oldest held picture when what holds it is only a hole in an
    /// upper spatial frame: its base frame is whole, and every upper frame it still misses is
    /// on a layer that has since delivered a later picture (a lost packet awaiting FEC or a
    /// retransmission, not a large frame still arriving). The host, which knows when the
    /// picture is due on screen, releases it with [`Assembler::release_oldest`] rather than
    /// hold it and every picture behind it past that time for the repair (the reorder window
    /// is 0.5 s, longer than the playout buffer's slack): the viewer sees the layer below,
    /// scaled, until the layer's next switch point, not a frozen picture.
    pub fn oldest_awaiting_repair(&self) -> Option<u32> {
        let (&pid, p) = self.pending.iter().next()?;
        if !(self.done_below..pid).all(|x| self.not_expected(x)) {
            return None;
        }
        let awaited = self.awaited_sids(p);
        if !awaited.contains(&0) || !p.frames.get(&0).is_some_and(PendingFrame::is_whole) {
            return None;
        }
        let mut hole = false;
        for s in awaited {
            if p.frames.get(&s).is_some_and(PendingFrame::is_whole) {
                continue;
            }
            let k = self.ladder.layer_of(s, p.tid)?;
            if self.newest_on[k].is_none_or(|n| n <= pid) {
                return None;
            }
            hole = true;
        }
        hole.then_some(p.timestamp)
    }

    /// The RTP timestamp of the oldest held picture when what holds it is only pictures
    /// before it not seen at all whose TID is above 0 (lost whole, or still to be repaired):
    /// no TL0 picture references them, so giving them up costs at most the TL2 pictures that
    /// predict from a lost TL1 one. The host releases it with [`Assembler::release_missing`]
    /// once the held picture is due on screen: waiting the whole reorder window (0.5 s) for
    /// their repair held every picture behind them, a freeze when no repair came.
    pub fn oldest_behind_missing(&self) -> Option<u32> {
        let (&pid, p) = self.pending.iter().next()?;
        if !self.is_complete(p) {
            return None;
        }
        let mut missing = false;
        for x in self.done_below..pid {
            if self.not_expected(x) {
                continue;
            }
            match self.predicted_tid(x) {
                Some(t) if t > 0 => missing = true,
                _ => return None,
            }
        }
        missing.then_some(p.timestamp)
    }

    /// Gives up the missing pictures in front of the oldest held one (see
    /// [`Assembler::oldest_behind_missing`]), counted as skipped, and lets it out.
    pub fn release_missing(&mut self) {
        let Some(&pid) = self.pending.keys().next() else {
            return;
        };
        let lost = (self.done_below..pid)
            .filter(|&x| !self.not_expected(x))
            .count() as u64;
        self.stats.pictures_skipped += lost;
        self.done_below = pid;
        self.advance(false);
    }

    /// Releases the oldest held picture with the frames that are whole (see
    /// [`Assembler::oldest_awaiting_repair`]) and returns the spatial layers it left out of a
    /// temporal-layer-0 picture: their chain is broken until a switch point, which the host
    /// asks for (a re-sync). Frames of the later pictures that predict from what was left out
    /// are left out as well.
    pub fn release_oldest(&mut self) -> Vec<u8> {
        let Some((pid, p)) = self.pending.pop_first() else {
            return Vec::new();
        };
        let broken: Vec<u8> = match p.tid {
            0 => self
                .awaited_sids(&p)
                .into_iter()
                .filter(|s| !p.frames.get(s).is_some_and(PendingFrame::is_whole))
                .collect(),
            _ => Vec::new(),
        };
        self.stats.released_unrepaired += 1;
        self.emit(pid, p, false);
        self.done_below = pid + 1;
        self.advance(false);
        broken
    }

    /// Give up waiting: return everything pending that can be returned.
    pub fn flush(&mut self) {
        self.advance(true);
    }

    /// Next decodable picture, in picture-ID order.
    /// The next picture, without the fillers of frames the encoder dropped at its top
    /// ([`AssembledPicture::trim_fillers`]); a picture dropped whole is skipped (the viewer
    /// keeps the picture before it a frame longer, not one older than it).
    pub fn pop(&mut self) -> Option<AssembledPicture> {
        loop {
            let mut pic = self.ready.pop_front()?;
            self.stats.filler_frames += pic.trim_fillers() as u64;
            if !pic.frames.is_empty() {
                return Some(pic);
            }
            self.stats.filler_pictures += 1;
        }
    }
}
