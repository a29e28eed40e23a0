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

use crate::error::{Error, Result};
use crate::ladder::LayerLadder;
use crate::rtp::RtpPacket;
use crate::superframe;
use crate::vp9rtp::{GofEntry, LayerIndices, PayloadDescriptor};
use std::collections::{BTreeMap, HashSet};

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
}

#[derive(Debug, Clone)]
struct Part {
    start: bool,
    end: bool,
    data: Vec<u8>,
}

#[derive(Debug, Clone)]
struct PendingFrame {
    desc: PayloadDescriptor,
    parts: BTreeMap<u64, Part>,
}

impl PendingFrame {
    /// Whether B..E are all here without a sequence gap ([`complete`](Self::complete)
    /// without building the payload: asked for every held picture on every packet).
    fn is_whole(&self) -> bool {
        let Some((&first, p0)) = self.parts.iter().next() else {
            return false;
        };
        if !p0.start {
            return false;
        }
        for (expect, (&seq, p)) in (first..).zip(self.parts.iter()) {
            if seq != expect || (seq != first && p.start) {
                return false;
            }
            if p.end {
                return true;
            }
        }
        false
    }

    /// Payload if B..E are all here without a sequence gap.
    fn complete(&self) -> Option<Vec<u8>> {
        let (&first, p0) = self.parts.iter().next()?;
        if !p0.start {
            return None;
        }
        let mut out = Vec::new();
        for (expect, (&seq, p)) in (first..).zip(self.parts.iter()) {
            if seq != expect || (seq != first && p.start) {
                return None;
            }
            out.extend_from_slice(&p.data);
            if p.end {
                return Some(out);
            }
        }
        None
    }
}

#[derive(Debug, Clone, Default)]
struct PendingPicture {
    timestamp: u32,
    tid: u8,
    frames: BTreeMap<u8, PendingFrame>,
}

/// Unwraps an N-bit counter into a monotone u64 around the largest value seen.
#[derive(Debug, Clone, Default)]
struct Unwrapper {
    last: Option<u64>,
}

impl Unwrapper {
    fn unwrap(&mut self, v: u64, bits: u32) -> u64 {
        let m = 1u64 << bits;
        let Some(last) = self.last else {
            // Start well above zero so that reordered earlier values never underflow.
            let x = (m << 4) | v;
            self.last = Some(x);
            return x;
        };
        let base = last & !(m - 1);
        let mut best = base | v;
        for cand in [best.wrapping_sub(m), best + m] {
            if cand.abs_diff(last) < best.abs_diff(last) {
                best = cand;
            }
        }
        if best > last {
            self.last = Some(best);
        }
        best
    }
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
    /// Pictures below this ID are done (returned or given up).
    done_below: u64,
    decoded: HashSet<(u8, u64)>,
    /// Extended picture IDs of TL0 pictures seen (each opens a picture group).
    tl0_pids: std::collections::BTreeSet<u64>,
    gof: Vec<GofEntry>,
    resolutions: Vec<(u16, u16)>,
    ready: std::collections::VecDeque<AssembledPicture>,
    stats: AssemblerStats,
    /// A TL0 picture was skipped after decoding began, and no key picture since.
    base_broken: bool,
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
            done_below: 0,
            decoded: HashSet::new(),
            tl0_pids: Default::default(),
            gof,
            resolutions: Vec::new(),
            ready: Default::default(),
            stats: AssemblerStats::default(),
            base_broken: false,
        }
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
    pub fn set_top_layer(&mut self, top: Option<usize>) {
        self.top_layer = top.map(|k| k.min(self.ladder.len() - 1));
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
        });
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

    /// Give up waiting: return everything pending that can be returned.
    pub fn flush(&mut self) {
        self.advance(true);
    }

    /// Next decodable picture, in picture-ID order.
    pub fn pop(&mut self) -> Option<AssembledPicture> {
        self.ready.pop_front()
    }

    fn expected_sids(&self, tid: u8) -> Vec<u8> {
        let Some(k) = self.top_layer else {
            return Vec::new();
        };
        (0..self.ladder.spatial_layers())
            .filter(|&s| self.ladder.keeps(k, s, tid))
            .collect()
    }

    fn is_complete(&self, p: &PendingPicture) -> bool {
        let exp = self.expected_sids(p.tid);
        !exp.is_empty()
            && exp
                .iter()
                .all(|s| p.frames.get(s).is_some_and(PendingFrame::is_whole))
    }

    /// Whether picture `pid` is known not to be expected by this subscription (its TID,
    /// predicted from the picture group, is not kept at all).
    fn not_expected(&self, pid: u64) -> bool {
        match self.predicted_tid(pid) {
            Some(tid) => self.expected_sids(tid).is_empty(),
            None => false,
        }
    }

    fn predicted_tid(&self, pid: u64) -> Option<u8> {
        if self.gof.is_empty() {
            return None;
        }
        let &anchor = self.tl0_pids.range(..=pid).next_back()?;
        let idx = (pid - anchor) as usize;
        self.gof.get(idx).map(|e| e.tid)
    }

    /// Whether every frame incomplete picture `p` still misses is lost rather than late: its
    /// layer has moved `reorder_pictures` past it (a frame of the top temporal layer, which
    /// no later picture references, as soon as its layer has moved past it at all: waiting
    /// for its repair would hold every later picture back for one picture's detail), or (no
    /// packet of that layer yet) any layer has, or the layer lags the newest picture by more
    /// than `patience_pictures` (stalled).
    fn missing_given_up(&self, pid: u64, p: &PendingPicture, newest: u64) -> bool {
        let patience = self.conf.patience_pictures.max(self.conf.reorder_pictures);
        if newest.saturating_sub(pid) >= patience {
            return true;
        }
        let top_temporal = p.tid + 1 >= self.ladder.temporal_layers();
        let reorder = if top_temporal {
            1
        } else {
            self.conf.reorder_pictures
        };
        self.expected_sids(p.tid).into_iter().all(|s| {
            if p.frames.get(&s).is_some_and(PendingFrame::is_whole) {
                return true;
            }
            let on = self
                .ladder
                .layer_of(s, p.tid)
                .and_then(|k| self.newest_on.get(k).copied().flatten());
            match on {
                Some(n) => n.saturating_sub(pid) >= reorder || newest.saturating_sub(n) >= patience,
                None => newest.saturating_sub(pid) >= self.conf.reorder_pictures,
            }
        })
    }

    /// Whether `p` is a key picture whose every expected frame is here (a switch point for
    /// every layer held).
    fn is_complete_key(&self, p: &PendingPicture) -> bool {
        p.frames.get(&0).is_some_and(|f| {
            f.parts.values().next().is_some_and(|x| x.start) && !f.desc.inter_picture
        }) && self.is_complete(p)
    }

    fn advance(&mut self, force: bool) {
        // Start-up: with no reference state yet (nothing decodable returned), no picture older
        // than a complete key picture can be decoded, and none can be shown after it, so they
        // are given up at once instead of after the reorder window. A player joins mid-stream:
        // the pictures before the first key picture are partial (their first packets went by
        // before the join) and each waited `reorder_pictures` for packets that never come,
        // which held the key picture and everything after it back by up to the whole window
        // (the latency bench: the first 1-2 s of pictures decoded 0.3-0.7 s after their last
        // packet, `docs/player.md` "Session 5").
        if self.decoded.is_empty() && !force {
            let key = self
                .pending
                .iter()
                .find(|(_, p)| self.is_complete_key(p))
                .map(|(&pid, _)| pid);
            if let Some(kp) = key {
                while let Some((&pid, _)) = self.pending.iter().next() {
                    if pid >= kp {
                        break;
                    }
                    let Some(p) = self.pending.remove(&pid) else {
                        break;
                    };
                    let complete = self.is_complete(&p);
                    self.emit(pid, p, complete);
                }
                self.done_below = self.done_below.max(kp);
            }
        }
        while let Some((&pid, _)) = self.pending.iter().next() {
            let p = &self.pending[&pid];
            let complete = self.is_complete(p);
            let newest = self.newest.unwrap_or(pid);
            let gap_ok = pid.saturating_sub(self.done_below) <= 64
                && (self.done_below..pid).all(|x| self.not_expected(x));
            let timed_out = if complete {
                newest.saturating_sub(pid) >= self.conf.reorder_pictures
            } else {
                self.missing_given_up(pid, p, newest)
            } || self.pending.len() > self.conf.max_pending;
            if !(force || timed_out || (complete && gap_ok)) {
                break;
            }
            let Some(p) = self.pending.remove(&pid) else {
                break;
            };
            self.emit(pid, p, complete);
            self.done_below = pid + 1;
        }
        // Forget chain state far behind the newest picture.
        if let Some(n) = self.newest {
            let floor = n.saturating_sub(256);
            if self.decoded.len() > 1024 {
                self.decoded.retain(|&(_, p)| p >= floor);
            }
            while self.tl0_pids.len() > 64 {
                self.tl0_pids.pop_first();
            }
        }
    }

    fn refs_of(&self, pid: u64, desc: &PayloadDescriptor) -> Option<Vec<u64>> {
        if desc.flexible {
            return Some(
                desc.p_diffs
                    .iter()
                    .map(|&d| pid.saturating_sub(d as u64))
                    .collect(),
            );
        }
        if self.gof.is_empty() {
            return None;
        }
        // Anchor: the TL0 picture that opened this picture's group. If that picture was lost
        // whole, the previous TL0 is found instead and the index runs past the group: the
        // frame is then (correctly) treated as unreferenceable.
        let &anchor = self.tl0_pids.range(..=pid).next_back()?;
        let idx = (pid - anchor) as usize;
        let e = self.gof.get(idx)?;
        if e.tid != desc.tid() {
            return None;
        }
        Some(
            e.p_diffs
                .iter()
                .map(|&d| pid.saturating_sub(d as u64))
                .collect(),
        )
    }

    fn emit(&mut self, pid: u64, mut p: PendingPicture, complete: bool) {
        let exp = self.expected_sids(p.tid);
        let mut frames = Vec::new();
        let mut key = false;
        let mut lower_ok = true;
        for s in exp {
            let Some(f) = p.frames.remove(&s) else {
                lower_ok = false;
                continue;
            };
            let Some(data) = f.complete() else {
                self.stats.frames_incomplete += 1;
                lower_ok = false;
                continue;
            };
            let d = &f.desc;
            let layer_dep_ok = s == 0 || !d.layer.is_some_and(|l| l.inter_layer) || lower_ok;
            let chain_ok = if !d.inter_picture {
                true
            } else {
                match self.refs_of(pid, d) {
                    Some(refs) => refs.iter().all(|r| self.decoded.contains(&(s, *r))),
                    None => false,
                }
            };
            if !(layer_dep_ok && chain_ok) {
                self.stats.frames_unreferenceable += 1;
                lower_ok = false;
                continue;
            }
            if s == 0 && !d.inter_picture {
                key = true;
                // A key picture refreshes every buffer: older chain state is irrelevant.
                self.decoded.retain(|&(_, q)| q >= pid);
            }
            self.decoded.insert((s, pid));
            frames.push(AssembledFrame {
                spatial: s,
                temporal: p.tid,
                data,
            });
            lower_ok = true;
        }
        if frames.is_empty() || frames[0].spatial != 0 {
            self.stats.pictures_skipped += 1;
            self.base_broken |= p.tid == 0 && self.stats.pictures > 0;
            return;
        }
        if key {
            self.base_broken = false;
        }
        self.stats.pictures += 1;
        self.ready.push_back(AssembledPicture {
            picture_id: pid,
            timestamp: p.timestamp,
            temporal: p.tid,
            key,
            frames,
            complete,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrapper() {
        let mut u = Unwrapper::default();
        let a = u.unwrap(0xfffe, 16);
        let b = u.unwrap(0xffff, 16);
        let c = u.unwrap(0x0001, 16);
        let d = u.unwrap(0x0000, 16);
        assert_eq!(b, a + 1);
        assert_eq!(c, a + 3);
        assert_eq!(d, a + 2);
        let mut p = Unwrapper::default();
        let x = p.unwrap(0x7fff, 15);
        assert_eq!(p.unwrap(0, 15), x + 1);
    }
}

#[cfg(test)]
mod prop {
    use super::*;
    use crate::vp9rtp::{LayerStreams, StreamConfig};
    use crate::vpx::{EncodedPicture, LayerFrame};
    use proptest::prelude::*;

    /// A synthetic L3T3 stream (no codec): picture n has TID from the 0212 pattern, a key
    /// picture every 16, spatial syncs every 8; frame bytes encode (n, s) so integrity can be
    /// checked.
    /// Serialised packets per picture, per layer.
    type Packets = Vec<Vec<Vec<Vec<u8>>>>;

    fn stream(n: usize, size: usize) -> (LayerLadder, Packets, Vec<EncodedPicture>) {
        let ladder = LayerLadder::default_720p_l3t3();
        let mut ls = LayerStreams::new(
            ladder.clone(),
            vec![(320, 180), (640, 360), (1280, 720)],
            StreamConfig {
                mtu: 200,
                ..Default::default()
            },
        )
        .unwrap();
        let mut pics = Vec::new();
        let mut out = Vec::new();
        for i in 0..n {
            let t = [0u8, 2, 1, 2][i % 4];
            let key = i % 16 == 0;
            let sync = !key && i % 8 == 0;
            let frames = (0..3u8)
                .map(|s| LayerFrame {
                    spatial: s,
                    temporal: t,
                    data: (0..size + 37 * s as usize)
                        .map(|j| (i * 7 + s as usize * 3 + j) as u8)
                        .collect(),
                    inter_picture: !(key || (sync && s > 0)),
                    inter_layer: s > 0,
                    switch_up: t > 0,
                    width: 0,
                    height: 0,
                })
                .collect();
            let pic = EncodedPicture {
                pts: i as i64 * 3000,
                index: i as u64,
                temporal: t,
                key,
                sync_mask: if sync { 6 } else { 0 },
                dropped_mask: 0,
                frames,
            };
            let pk = ls.packets(&pic).unwrap();
            out.push(
                pk.iter()
                    .map(|v| v.iter().map(|p| p.to_bytes(&[]).unwrap()).collect())
                    .collect(),
            );
            pics.push(pic);
        }
        (ladder, out, pics)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn assembler_invariants_under_loss_and_reordering(
            k in 0usize..9,
            seed in any::<u64>(),
            loss_pct in 0u64..30,
            size in 10usize..700,
        ) {
            let (ladder, packets, pics) = stream(48, size);
            let mut asm = Assembler::new(ladder.clone(), Some(k), AssemblerConfig::default());
            let mut x = seed | 1;
            let mut rnd = move || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x % 100 };
            let mut outs = Vec::new();
            for per_layer in &packets {
                let mut batch = Vec::new();
                for (layer, v) in per_layer.iter().enumerate() {
                    for p in v {
                        if rnd() >= loss_pct {
                            batch.push((layer, p));
                        }
                    }
                }
                for i in 1..batch.len() {
                    if rnd() < 10 { batch.swap(i - 1, i); }
                }
                for (layer, p) in batch {
                    asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                }
                while let Some(p) = asm.pop() { outs.push(p); }
            }
            asm.flush();
            while let Some(p) = asm.pop() { outs.push(p); }
            let mut last = None;
            for p in &outs {
                // Increasing picture IDs, layers 0..=s contiguous, all kept by the subscription.
                prop_assert!(last.is_none_or(|l| p.picture_id > l));
                last = Some(p.picture_id);
                for (i, f) in p.frames.iter().enumerate() {
                    prop_assert_eq!(f.spatial as usize, i);
                    prop_assert!(ladder.keeps(k, f.spatial, f.temporal));
                }
                // Integrity: the frame bytes are exactly what was sent.
                let orig = pics.iter().find(|q| {
                    q.frames[0].data == p.frames[0].data
                });
                let orig = orig.expect("frame 0 bytes match a sent picture");
                for f in &p.frames {
                    prop_assert_eq!(&f.data, &orig.frames[f.spatial as usize].data);
                }
            }
            if loss_pct == 0 {
                let expected = pics.iter().filter(|q| ladder.keeps(k, 0, q.temporal)).count();
                prop_assert_eq!(outs.len(), expected);
            }
        }
    }

    /// A stream whose first packet to arrive belongs to picture 1 (a higher layer, paced
    /// separately, overtook the base layer's key picture 0): the assembler still starts at
    /// picture 0 instead of dropping it as late and waiting for the next key picture.
    #[test]
    fn start_at_the_key_picture_when_a_later_picture_arrives_first() {
        let (ladder, packets, _) = stream(8, 300);
        let k = 2; // spatial 0, temporal 0..=2: every picture is kept
        let mut asm = Assembler::new(ladder, Some(k), AssemblerConfig::default());
        let mut push = |i: usize| {
            for (layer, v) in packets[i].iter().enumerate().take(k + 1) {
                for p in v {
                    asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                }
            }
        };
        push(1);
        for i in [0, 2, 3, 4, 5, 6, 7] {
            push(i);
        }
        asm.flush();
        let mut outs = Vec::new();
        while let Some(p) = asm.pop() {
            outs.push(p);
        }
        assert!(!outs.is_empty(), "nothing decodable: {:?}", asm.stats());
        assert!(outs[0].key, "first picture returned is not the key picture");
        let first = outs[0].picture_id;
        // Picture 1 came first and was given up (its reference, picture 0, was missing then);
        // every later picture decodes.
        assert_eq!(outs.len(), 7, "{:?}", asm.stats());
        assert!(outs
            .iter()
            .all(|p| p.picture_id == first || p.picture_id >= first + 2));
        assert_eq!(asm.stats().late, 0);
    }

    /// The top spatial layer's packets lag the others by 10 pictures (its layers' sender
    /// queues are behind, as after a key picture): every picture still comes out whole,
    /// because the layers that lag are waited for, while a frame lost on a layer that has
    /// moved on is given up after `reorder_pictures` of that layer, well before the
    /// `patience_pictures` a lagging layer gets.
    #[test]
    fn lagging_layer_is_waited_for_and_a_lost_frame_is_not() {
        let (ladder, packets, _) = stream(40, 300);
        let conf = AssemblerConfig {
            reorder_pictures: 4,
            patience_pictures: 20,
            max_pending: 64,
        };
        let top = |k: usize| ladder.cell(k).unwrap().spatial == 2;
        let mut asm = Assembler::new(ladder.clone(), Some(8), conf);
        let mut outs = Vec::new();
        let lag = 10;
        for i in 0..packets.len() + lag {
            // Pictures i's lower layers, and picture i - lag's top spatial layer.
            let mut feed = |pic: usize, want_top: bool| {
                for (layer, v) in packets[pic].iter().enumerate() {
                    if top(layer) != want_top {
                        continue;
                    }
                    for p in v {
                        asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                    }
                }
            };
            if i < packets.len() {
                feed(i, false);
            }
            if i >= lag {
                feed(i - lag, true);
            }
            while let Some(p) = asm.pop() {
                outs.push(p);
            }
        }
        assert_eq!(outs.len(), 40);
        // Before the top layer delivered anything its frames are not waited for (pictures
        // 0..=7, as at a join); from its first switch point on (the re-sync at 8) every
        // picture comes out whole, each waiting for its lagging top layer.
        let partial: Vec<u64> = outs
            .iter()
            .filter(|p| !(p.complete && p.top_spatial() == 2))
            .map(|p| p.picture_id % (1 << 15))
            .collect();
        assert_eq!(partial, (0..8).collect::<Vec<u64>>());

        // In order, one frame lost: after which picture's packets does the picture that lost
        // it come out (incomplete)?
        let given_up_after = |pic: usize, lost_layer: usize| {
            let mut asm = Assembler::new(ladder.clone(), Some(8), conf);
            for (i, per_layer) in packets.iter().enumerate() {
                for (layer, v) in per_layer.iter().enumerate() {
                    if i == pic && layer == lost_layer {
                        continue;
                    }
                    for p in v {
                        asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                    }
                }
                while let Some(p) = asm.pop() {
                    if p.picture_id % (1 << 15) == pic as u64 {
                        assert!(!p.complete);
                        return Some(i);
                    }
                }
            }
            None
        };
        // The top-layer frame of picture 9 (TL2, referenced by no later picture): picture 9
        // comes out as soon as its layer has delivered the next TL2 picture (11), not at
        // 9 + 4 or 9 + 20.
        assert_eq!(given_up_after(9, ladder.layer_of(2, 2).unwrap()), Some(11));
        // A frame of a referenced layer (picture 8's top layer, TL0) waits for its repair
        // until its layer has moved `reorder_pictures` on (the TL0 layer's next picture, 12).
        assert_eq!(given_up_after(8, ladder.layer_of(2, 0).unwrap()), Some(12));
    }

    /// A player joins mid-stream: picture 10 arrives without its base-layer packets (they
    /// went by before the join), 11..=15 whole (undecodable: their references are gone),
    /// then the key picture 16. The key picture is returned as soon as it is complete, not
    /// once the reorder window has given picture 10 up.
    #[test]
    fn key_picture_at_start_does_not_wait_for_older_partial_pictures() {
        let (ladder, packets, _) = stream(20, 300);
        let k = 8;
        let conf = AssemblerConfig {
            reorder_pictures: 23,
            patience_pictures: 23,
            max_pending: 45,
        };
        let mut asm = Assembler::new(ladder, Some(k), conf);
        let push = |asm: &mut Assembler, i: usize, from_layer: usize| {
            for (layer, v) in packets[i].iter().enumerate().skip(from_layer) {
                for p in v {
                    asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                }
            }
        };
        // Layers 3..=8 are spatial layers 1 and 2: picture 10 without its base-layer frame.
        push(&mut asm, 10, 3);
        for i in 11..16 {
            push(&mut asm, i, 0);
        }
        assert!(
            asm.pop().is_none(),
            "nothing decodable before the key picture"
        );
        push(&mut asm, 16, 0);
        let first = asm.pop().expect("key picture returned when complete");
        assert!(first.key && first.complete);
        assert_eq!(first.frames.len(), 3);
        // The older pictures were given up, not returned.
        assert!(asm.pop().is_none());
        assert_eq!(asm.stats().pictures, 1);
        assert_eq!(asm.stats().pictures_skipped, 6);
        // The pictures after it flow at once.
        push(&mut asm, 17, 0);
        assert_eq!(asm.pop().map(|p| p.frames.len()), Some(3));
    }

    /// A TL0 picture's base frame loses a packet after decoding began: the base chain is
    /// broken (every picture until the next key is skipped) and stays so until a key picture
    /// is returned. A lost TL2 base frame does not break it.
    #[test]
    fn a_lost_base_tl0_frame_breaks_the_chain_until_a_key_picture() {
        let (ladder, packets, _) = stream(20, 300);
        let mut asm = Assembler::new(ladder, Some(0), AssemblerConfig::default());
        let mut broken = Vec::new();
        for (i, pic) in packets.iter().enumerate() {
            for p in &pic[0] {
                // Picture 5 (TL2) and picture 8 (TL0) lose a packet of their base frame.
                if (i == 5 || i == 8) && std::ptr::eq(p, &pic[0][0]) {
                    continue;
                }
                asm.push(0, &RtpPacket::parse(p).unwrap()).unwrap();
            }
            while asm.pop().is_some() {}
            broken.push(asm.base_broken());
        }
        asm.flush();
        // Picture 8 is given up once 4 newer pictures arrived (the default window), i.e. at
        // picture 12; the key picture 16 repairs it.
        let first = broken.iter().position(|&b| b).unwrap();
        assert_eq!(first, 12, "{broken:?}");
        assert!(broken[12..16].iter().all(|&b| b), "{broken:?}");
        assert!(!broken[16], "{broken:?}");
        assert!(asm.stats().pictures_skipped >= 2);
    }

    #[test]
    fn end_of_picture_for_partial_subscriber() {
        let ladder = LayerLadder::default_720p_l3t3();
        let d = |sid, tid, end| PayloadDescriptor {
            end,
            layer: Some(LayerIndices {
                tid,
                switch_up: false,
                sid,
                inter_layer: sid > 0,
            }),
            ..Default::default()
        };
        // k = 3 holds (1,0): TL0 pictures end at spatial 1, TL2 pictures at spatial 0.
        assert!(Assembler::is_end_of_picture(&ladder, 3, &d(1, 0, true)));
        assert!(!Assembler::is_end_of_picture(&ladder, 3, &d(0, 0, true)));
        assert!(Assembler::is_end_of_picture(&ladder, 3, &d(0, 2, true)));
        assert!(!Assembler::is_end_of_picture(&ladder, 3, &d(1, 0, false)));
    }
}
