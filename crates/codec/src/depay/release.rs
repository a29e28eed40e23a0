//! Releasing held pictures in picture-ID order (when complete, or once what they miss is
//! given up) and keeping of each only the frames whose reference chain was returned.

use super::pending::PendingPicture;
use super::{AssembledFrame, AssembledPicture, Assembler};
use crate::vp9rtp::PayloadDescriptor;

impl Assembler {
    pub(super) fn advance(&mut self, force: bool) {
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
            let hopeless = self.hopeless_sids(pid, p);
            let complete = self.is_complete_but(p, hopeless);
            let newest = self.newest.unwrap_or(pid);
            // A picture not seen at all is not waited for when it is not expected, or is a
            // top-temporal-layer picture lost whole.
            let settled = |x: u64| self.not_expected(x) || self.discardable_picture_lost(x);
            let gap_ok =
                pid.saturating_sub(self.done_below) <= 64 && (self.done_below..pid).all(settled);
            // A picture given up for its own missing frames still waits for an older picture
            // not seen at all (reordered) until that one counts as lost: emitted first, it
            // moved `done_below` past the older one, whose packets then came "late" and were
            // thrown away. That happened when a leave emptied a held TL2 picture (nothing left
            // to wait for) just before the TL0 or TL1 picture in front of it arrived: the
            // base layer's chain broke without a loss, a freeze until the next key picture
            // (the quality suite's jittery path).
            let gap_resolved = || {
                (self.done_below..pid)
                    .all(|x| settled(x) || newest.saturating_sub(x) >= self.conf.reorder_pictures)
            };
            let timed_out = if complete {
                newest.saturating_sub(pid) >= self.conf.reorder_pictures
            } else {
                self.missing_given_up(pid, p, newest, hopeless) && gap_resolved()
            } || self.pending.len() > self.conf.max_pending;
            if !(force || timed_out || (complete && gap_ok)) {
                break;
            }
            // Nothing decodable returned yet: a picture that is not a key picture cannot be
            // decoded now, and an older key picture may still come (at the start, packets of
            // a later picture can come first; the start then reopens). Returned before it, the
            // pictures in between were lost though they could be decoded after it: a TL1
            // picture behind a late key picture under jitter (proptest
            // `leaving_a_temporal_layer_loses_no_lower_picture`). Held until a key picture
            // is complete (the start-up rule above), or the patience or pending bound.
            let patient = newest.saturating_sub(pid) < self.conf.patience_pictures
                && self.pending.len() <= self.conf.max_pending;
            if self.decoded.is_empty() && !force && patient && !Self::is_key_start(p) {
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
            while self.unsent.first().is_some_and(|&x| x < self.done_below) {
                self.unsent.pop_first();
            }
        }
    }

    pub(super) fn refs_of(&self, pid: u64, desc: &PayloadDescriptor) -> Option<Vec<u64>> {
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

    pub(super) fn emit(&mut self, pid: u64, mut p: PendingPicture, complete: bool) {
        let awaited = self.awaited_sids(&p);
        let mut frames = Vec::new();
        let mut key = false;
        let mut lower_ok = true;
        // Why the base frame (spatial layer 0) was not returned, and its references.
        let mut base_fail: (&'static str, Vec<u64>) = ("missing", Vec::new());
        for s in self.expected_sids(p.tid) {
            if !awaited.contains(&s) {
                // Not sent: a frame above it that predicts from it cannot be decoded.
                lower_ok = false;
                if s == 0 {
                    base_fail.0 = "not sent";
                }
                continue;
            }
            let Some(f) = p.frames.remove(&s) else {
                lower_ok = false;
                continue;
            };
            let Some(data) = f.complete() else {
                self.stats.frames_incomplete += 1;
                lower_ok = false;
                if s == 0 {
                    base_fail.0 = "incomplete";
                }
                continue;
            };
            let d = &f.desc;
            let layer_dep_ok = s == 0 || !d.layer.is_some_and(|l| l.inter_layer) || lower_ok;
            let chain_ok = if !d.inter_picture {
                true
            } else {
                match self.refs_of(pid, d) {
                    Some(refs) => {
                        let ok = refs.iter().all(|r| self.decoded.contains(&(s, *r)));
                        if !ok && s == 0 {
                            base_fail = ("unreferenceable", refs);
                        }
                        ok
                    }
                    None => {
                        if s == 0 {
                            base_fail.0 = "no references";
                        }
                        false
                    }
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
            // Already broken: the pictures after the first break are unreferenceable by
            // consequence, not news.
            if p.tid == 0 && self.stats.pictures > 0 && !self.base_broken {
                let count = self.last_base_break.as_ref().map_or(0, |b| b.count) + 1;
                self.last_base_break = Some(super::BaseBreak {
                    picture_id: pid,
                    reason: base_fail.0,
                    refs: base_fail.1,
                    count,
                });
            }
            self.base_broken |= p.tid == 0 && self.stats.pictures > 0;
            return;
        }
        if key {
            self.base_broken = false;
        }
        self.stats.pictures += 1;
        self.first_returned.get_or_insert(pid);
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
