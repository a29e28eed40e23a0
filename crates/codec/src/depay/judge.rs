//! Whether a held picture is complete, and whether what it misses is lost or only late.

use super::pending::{PendingFrame, PendingPicture};
use super::{Assembler, Join};

impl Assembler {
    pub(super) fn expected_sids(&self, tid: u8) -> Vec<u8> {
        let Some(k) = self.top_layer else {
            return Vec::new();
        };
        (0..self.ladder.spatial_layers())
            .filter(|&s| self.ladder.keeps(k, s, tid))
            .collect()
    }

    /// The spatial layers this subscription waits for in picture `p`: those it holds at the
    /// picture's temporal layer, less those the sender marked as not sent.
    pub(super) fn awaited_sids(&self, p: &PendingPicture) -> Vec<u8> {
        let mut exp = self.expected_sids(p.tid);
        if let Some(sent) = p.sent {
            exp.retain(|&s| sent.has(s));
        }
        exp
    }

    pub(super) fn is_complete(&self, p: &PendingPicture) -> bool {
        self.is_complete_but(p, 0)
    }

    /// [`Assembler::is_complete`], not waiting for the spatial layers of `hopeless` (bit s).
    pub(super) fn is_complete_but(&self, p: &PendingPicture, hopeless: u8) -> bool {
        let exp = self.awaited_sids(p);
        !exp.is_empty()
            && exp.iter().all(|&s| {
                hopeless & (1 << s) != 0 || p.frames.get(&s).is_some_and(PendingFrame::is_whole)
            })
    }

    /// The spatial layers (bit s) of picture `pid`, the oldest held, whose frame cannot be
    /// decoded whatever else of it arrives: predicted from an earlier, settled picture whose
    /// frame on that layer was not returned (a layer joined and not
    /// yet at its switch point, or broken by a loss), or from the layer below when that one
    /// cannot be. `emit` leaves such a frame out; waiting for the rest of its packets only
    /// held the picture back: after a viewer's join of upper layers, a re-sync another viewer
    /// asked for arrived before this viewer's switch point, and the picture, decodable at the
    /// layers below, waited 250-300 ms for the large frame it could not use (a freeze at the
    /// start of the quality suite's clean path). Mirrors `emit`'s rules; a frame of which no
    /// packet has come, or whose references are unknown, is assumed decodable.
    pub(super) fn hopeless_sids(&self, pid: u64, p: &PendingPicture) -> u8 {
        let awaited = self.awaited_sids(p);
        let (mut lower_ok, mut mask) = (true, 0u8);
        for s in self.expected_sids(p.tid) {
            if !awaited.contains(&s) {
                lower_ok = false;
                continue;
            }
            let Some(f) = p.frames.get(&s) else {
                lower_ok = true;
                continue;
            };
            let d = &f.desc;
            let layer_dep_ok = s == 0 || !d.layer.is_some_and(|l| l.inter_layer) || lower_ok;
            // Only references already settled (before `done_below`) and not before the first
            // picture returned are known to be missing: an older picture not seen yet may
            // still come and be decoded, and at the stream's start `done_below` moves past
            // pictures whose packets come after a later one's (the start may reopen).
            let known_missing = |r: u64| {
                r < self.done_below
                    && self.first_returned.is_some_and(|f| r >= f)
                    && !self.decoded.contains(&(s, r))
            };
            let chain_ok = !d.inter_picture
                || self
                    .refs_of(pid, d)
                    .is_none_or(|r| !r.iter().any(|&r| known_missing(r)));
            lower_ok = layer_dep_ok && chain_ok;
            if !lower_ok {
                mask |= 1 << s.min(7);
            }
        }
        mask
    }

    /// Whether picture `pid` is known not to be expected by this subscription (the sender
    /// marked it as sent with no frame, or its TID, predicted from the picture group, is kept
    /// only on layers a join does not wait for yet: none at all, or layers joined whose first
    /// packet is of a later picture). Without the join's part a picture that only a newly
    /// joined layer carries (a TL2 picture when TL2 is joined) held every picture behind it
    /// for `reorder_pictures` while the graft took effect.
    pub(super) fn not_expected(&self, pid: u64) -> bool {
        if self.unsent.contains(&pid) {
            return true;
        }
        match self.predicted_tid(pid) {
            Some(tid) => self
                .expected_sids(tid)
                .into_iter()
                .all(|s| self.not_yet_joined(pid, s, tid)),
            None => false,
        }
    }

    /// Whether picture `pid`, not seen at all, is a lost picture of the top temporal layer
    /// above TL0: no later picture references it, so it is lost as soon as its base layer
    /// has delivered a later picture (the rule for such a frame, `missing_given_up`).
    /// Without it, a TL2 picture lost whole (one packet at 160x90, unrepaired) held every
    /// picture behind it for `reorder_pictures` (0.5 s): a freeze for every such loss.
    pub(super) fn discardable_picture_lost(&self, pid: u64) -> bool {
        let Some(tid) = self.predicted_tid(pid) else {
            return false;
        };
        if tid == 0 || tid + 1 < self.ladder.temporal_layers() {
            return false;
        }
        self.ladder
            .layer_of(0, tid)
            .and_then(|k| self.newest_on.get(k).copied().flatten())
            .is_some_and(|n| n > pid)
    }

    /// Whether the frame (s, tid) of picture `pid` is on a layer joined after it: joined with
    /// no packet yet, or whose first packet is of a later picture ([`Assembler::set_top_layer`]).
    fn not_yet_joined(&self, pid: u64, s: u8, tid: u8) -> bool {
        self.ladder
            .layer_of(s, tid)
            .is_some_and(|k| match self.joins[k] {
                Join::Held => false,
                Join::Awaiting => true,
                Join::From(first) => pid < first,
            })
    }

    pub(super) fn predicted_tid(&self, pid: u64) -> Option<u8> {
        if self.gof.is_empty() {
            return None;
        }
        let &anchor = self.tl0_pids.range(..=pid).next_back()?;
        let idx = (pid - anchor) as usize;
        self.gof.get(idx).map(|e| e.tid)
    }

    /// Whether every frame incomplete picture `p` still misses is lost rather than late: its
    /// layer has moved `reorder_pictures` past it (a frame of the top temporal layer above
    /// TL0, which no later picture references, as soon as its layer has moved past it at all: waiting
    /// for its repair would hold every later picture back for one picture's detail), or (no
    /// packet of that layer yet) any layer has, or the layer lags the newest picture by more
    /// than `patience_pictures` (stalled). A newly joined upper layer is not waited for before
    /// its first packet, nor for the pictures before it ([`Assembler::set_top_layer`]).
    pub(super) fn missing_given_up(
        &self,
        pid: u64,
        p: &PendingPicture,
        newest: u64,
        hopeless: u8,
    ) -> bool {
        let patience = self.conf.patience_pictures.max(self.conf.reorder_pictures);
        if newest.saturating_sub(pid) >= patience {
            return true;
        }
        // With one temporal layer every frame is TL0 and referenced by the next picture.
        let top_temporal = p.tid > 0 && p.tid + 1 >= self.ladder.temporal_layers();
        let reorder = if top_temporal {
            1
        } else {
            self.conf.reorder_pictures
        };
        self.awaited_sids(p).into_iter().all(|s| {
            if hopeless & (1 << s) != 0 || p.frames.get(&s).is_some_and(PendingFrame::is_whole) {
                return true;
            }
            if self.not_yet_joined(pid, s, p.tid) {
                return true;
            }
            let k = self.ladder.layer_of(s, p.tid);
            let on = k.and_then(|k| self.newest_on.get(k).copied().flatten());
            match on {
                Some(n) => n.saturating_sub(pid) >= reorder || newest.saturating_sub(n) >= patience,
                None => newest.saturating_sub(pid) >= self.conf.reorder_pictures,
            }
        })
    }

    /// Whether `p`'s base frame is here and predicts from no earlier picture (a key picture,
    /// whatever else of it is missing).
    pub(super) fn is_key_start(p: &PendingPicture) -> bool {
        p.frames.get(&0).is_some_and(|f| !f.desc.inter_picture)
    }

    /// Whether `p` is a key picture whose every expected frame is here (a switch point for
    /// every layer held).
    pub(super) fn is_complete_key(&self, p: &PendingPicture) -> bool {
        Self::is_key_start(p)
            && p.frames[&0].parts.values().next().is_some_and(|x| x.start)
            && self.is_complete(p)
    }
}
