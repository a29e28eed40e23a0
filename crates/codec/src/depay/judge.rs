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
        let exp = self.awaited_sids(p);
        !exp.is_empty()
            && exp
                .iter()
                .all(|s| p.frames.get(s).is_some_and(PendingFrame::is_whole))
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
    pub(super) fn missing_given_up(&self, pid: u64, p: &PendingPicture, newest: u64) -> bool {
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
            if p.frames.get(&s).is_some_and(PendingFrame::is_whole) {
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

    /// Whether `p` is a key picture whose every expected frame is here (a switch point for
    /// every layer held).
    pub(super) fn is_complete_key(&self, p: &PendingPicture) -> bool {
        p.frames.get(&0).is_some_and(|f| {
            f.parts.values().next().is_some_and(|x| x.start) && !f.desc.inter_picture
        }) && self.is_complete(p)
    }
}
