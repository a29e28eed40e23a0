//! Which frames of a picture the sender leaves out, and the picture's sent-frames mark.
//!
//! Every (spatial, temporal) cell is paced at its own constant rate, so a frame several times
//! its budget (a scene cut coded against a reference from before it) waits several of its
//! layer's frame periods in the layer's queue, and every viewer holding that layer waits for
//! it: the picture, and each one decoded after it, is late. A frame no other frame references
//! (the top temporal layer) is left out when it would wait longer than `top_wait`; a frame of
//! a middle temporal layer when it would wait longer than `mid_wait`, together with the frames
//! that may predict from it: the same picture's higher spatial layers (inter-layer prediction)
//! and, until the next picture of its temporal layer or below, the higher temporal layers'
//! frames on its spatial layer and above (libvpx's 0101 and 0212 patterns). Temporal layer 0
//! and key pictures are never left out: everything predicts from them. Nor, in an encode with
//! upper spatial layers, is a frame of the lowest one: leaving it out takes the whole picture
//! (and a TL1 frame's followers with it), two or three pictures gone at once for every viewer,
//! a freeze; sent late, it is one late picture, and the lowest layer is the smallest share of
//! any queue. In 15 quality-suite runs every clean- and middle-path freeze came in a run where
//! a lowest-layer frame had been left out (docs/server.md "Discardable frames").
//!
//! Every media packet of a picture carries which spatial layers it was sent with
//! (`proto::wire::frames_ext`), so receivers do not wait for a frame that will not come.

use proto::{SessionInfo, TrackKind};
use std::time::Duration;

/// Per-session frame-discarding state (video sessions with layered sending).
#[derive(Debug, Clone)]
pub(super) struct FrameDiscard {
    /// Per transport layer: the video cell it carries, (spatial, temporal).
    cells: Vec<Option<(u8, u8)>>,
    /// The video layers in spatial order (a frame's dependents are judged after it).
    by_spatial: Vec<usize>,
    temporal_layers: u8,
    top_wait: Option<Duration>,
    mid_wait: Option<Duration>,
    /// Per spatial layer: frames of a temporal layer above this one are left out (a frame
    /// they may predict from was), until a picture of this temporal layer or below.
    broken_above: Vec<Option<u8>>,
    /// Pictures since the last one sent with any frame that were sent with none.
    unsent_run: u8,
}

fn by_spatial(cells: &[Option<(u8, u8)>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..cells.len()).filter(|&k| cells[k].is_some()).collect();
    order.sort_by_key(|&k| cells[k].map(|(s, _)| s));
    order
}

/// What to do with one picture's cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Verdict {
    /// Per transport layer: the cell's frame is left out.
    pub drop: Vec<bool>,
    /// Bit s: the picture is sent with a frame on spatial layer s.
    pub sent: u8,
    /// Pictures right before this one sent with no frame at all (their picture IDs have no
    /// packet to carry a mark; the next picture's says they will not come).
    pub unsent_before: u8,
}

impl FrameDiscard {
    pub(super) fn new(
        info: &SessionInfo,
        top_wait: Option<Duration>,
        mid_wait: Option<Duration>,
    ) -> FrameDiscard {
        let mut cells = vec![None; info.layers.len()];
        let mut temporal_layers = 1;
        let mut spatial_layers = 1;
        if let Some(t) = info.track(TrackKind::Video) {
            if let proto::Codec::Vp9(p) = &t.codec {
                temporal_layers = p.temporal.max(1);
                spatial_layers = p.spatial.max(1);
            }
            if t.streams.len() >= 2 {
                for s in &t.streams {
                    if let Some(c) = cells.get_mut(s.layer as usize) {
                        *c = Some((s.spatial, s.temporal));
                    }
                }
            }
        }
        FrameDiscard {
            by_spatial: by_spatial(&cells),
            cells,
            temporal_layers,
            top_wait,
            mid_wait,
            broken_above: vec![None; spatial_layers as usize],
            unsent_run: 0,
        }
    }

    /// The verdict on a picture with `packets[k]` packets on layer k, where `wait(k, n)` is how
    /// long the last of `n` more packets would wait in layer k's queue.
    pub(super) fn judge(
        &mut self,
        key: bool,
        packets: &[usize],
        wait: impl Fn(usize, usize) -> Option<Duration>,
    ) -> Verdict {
        let mut drop = vec![false; packets.len()];
        let mut sent = 0u8;
        // The picture's temporal layer: that of any cell with a frame.
        let tid = packets
            .iter()
            .enumerate()
            .find_map(|(k, &n)| (n > 0).then(|| self.cells.get(k).copied().flatten()))
            .flatten()
            .map(|(_, t)| t);
        if let Some(t) = tid {
            for b in &mut self.broken_above {
                if b.is_some_and(|bt| t <= bt) {
                    *b = None;
                }
            }
        }
        let top = self.temporal_layers.saturating_sub(1);
        let mut dropped_below: Option<u8> = None;
        for &k in &self.by_spatial {
            let Some((s, t)) = self.cells[k] else {
                continue;
            };
            if packets.get(k).is_none_or(|&n| n == 0) {
                continue;
            }
            let mut out = false;
            let lowest_of_several = s == 0 && self.broken_above.len() > 1;
            if !key && t > 0 && !lowest_of_several {
                let dependent = dropped_below.is_some_and(|d| d == t)
                    || self.broken_above[..=(s as usize).min(self.broken_above.len() - 1)]
                        .iter()
                        .any(|b| b.is_some_and(|bt| t > bt));
                let limit = if t == top {
                    self.top_wait
                } else {
                    self.mid_wait
                };
                let too_late = limit.is_some_and(|m| wait(k, packets[k]).is_some_and(|w| w > m));
                out = dependent || too_late;
                if out {
                    dropped_below = Some(t);
                    if t < top {
                        if let Some(b) = self.broken_above.get_mut(s as usize) {
                            *b = Some(b.map_or(t, |bt| bt.min(t)));
                        }
                    }
                }
            }
            drop[k] = out;
            if !out && s < 8 {
                sent |= 1 << s;
            }
        }
        let unsent_before = self.unsent_run;
        self.unsent_run = if sent == 0 {
            self.unsent_run.saturating_add(1)
        } else {
            0
        };
        Verdict {
            drop,
            sent,
            unsent_before,
        }
    }

    /// Whether this session has cells to judge (a layered video session).
    pub(super) fn applies(&self) -> bool {
        self.cells.iter().any(Option::is_some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// L3T3, layer k = spatial k / 3, temporal k % 3.
    fn l3t3(top: Option<u64>, mid: Option<u64>) -> FrameDiscard {
        let cells: Vec<_> = (0..9).map(|k| Some((k / 3, k % 3))).collect();
        FrameDiscard {
            by_spatial: by_spatial(&cells),
            cells,
            temporal_layers: 3,
            top_wait: top.map(Duration::from_millis),
            mid_wait: mid.map(Duration::from_millis),
            broken_above: vec![None; 3],
            unsent_run: 0,
        }
    }

    /// A picture of temporal layer `t` with 3 packets on each spatial layer.
    fn pic(t: u8) -> Vec<usize> {
        (0..9)
            .map(|k| if k % 3 == t as usize { 3 } else { 0 })
            .collect()
    }

    fn dropped(v: &Verdict) -> Vec<usize> {
        (0..9).filter(|&k| v.drop[k]).collect()
    }

    #[test]
    fn a_late_middle_frame_takes_its_dependents_along_until_the_next_base_picture() {
        let mut d = l3t3(Some(250), Some(500));
        // Layer 4 (S1T1) is 600 ms behind: S1T1 and S2T1 of this picture are left out.
        let late = |k: usize, _n: usize| Some(Duration::from_millis(if k == 4 { 600 } else { 10 }));
        let v = d.judge(false, &pic(1), late);
        assert_eq!(dropped(&v), vec![4, 7]);
        assert_eq!(v.sent, 0b001);
        // The next TL2 picture predicts from the TL1 one on S1 and S2: left out there.
        let ok = |_k: usize, _n: usize| Some(Duration::from_millis(10));
        let v = d.judge(false, &pic(2), ok);
        assert_eq!(dropped(&v), vec![5, 8]);
        assert_eq!(v.sent, 0b001);
        // A TL0 picture ends it.
        let v = d.judge(false, &pic(0), ok);
        assert!(dropped(&v).is_empty());
        assert_eq!(v.sent, 0b111);
        let v = d.judge(false, &pic(2), ok);
        assert!(dropped(&v).is_empty());
    }

    #[test]
    fn top_frames_go_alone_and_base_lowest_spatial_and_key_frames_never() {
        let mut d = l3t3(Some(250), Some(500));
        let slow = |_k: usize, _n: usize| Some(Duration::from_secs(5));
        // The lowest spatial layer's frame goes, late: the picture is shown, at 1/4 the size.
        let v = d.judge(false, &pic(2), slow);
        assert_eq!(dropped(&v), vec![5, 8]);
        assert_eq!(v.sent, 0b001);
        let v = d.judge(false, &pic(1), slow);
        assert_eq!(dropped(&v), vec![4, 7]);
        let v = d.judge(false, &pic(0), slow);
        assert!(dropped(&v).is_empty());
        let v = d.judge(true, &pic(1), slow);
        assert!(dropped(&v).is_empty());
        assert_eq!(v.sent, 0b111);
    }

    /// With one spatial layer there is no lower picture to show: a late top frame is left
    /// out (one picture fewer), and the next picture tells the receivers it went unsent.
    #[test]
    fn a_single_spatial_layer_drops_its_late_top_frames() {
        let cells: Vec<_> = (0..3).map(|t| Some((0, t))).collect();
        let mut d = FrameDiscard {
            by_spatial: by_spatial(&cells),
            cells,
            temporal_layers: 3,
            top_wait: Some(Duration::from_millis(250)),
            mid_wait: Some(Duration::from_millis(500)),
            broken_above: vec![None; 1],
            unsent_run: 0,
        };
        let slow = |_k: usize, _n: usize| Some(Duration::from_secs(5));
        let v = d.judge(false, &[0, 0, 3], slow);
        assert_eq!(v.drop, vec![false, false, true]);
        assert_eq!(v.sent, 0);
        let v = d.judge(false, &[3, 0, 0], slow);
        assert_eq!(v.drop, vec![false; 3]);
        assert_eq!(
            v.unsent_before, 1,
            "the TL2 picture before went with no frame"
        );
    }

    #[test]
    fn a_left_out_top_frame_takes_the_higher_spatial_frames_of_its_picture() {
        let mut d = l3t3(Some(250), None);
        let s1_late =
            |k: usize, _n: usize| Some(Duration::from_millis(if k == 5 { 300 } else { 10 }));
        let v = d.judge(false, &pic(2), s1_late);
        assert_eq!(dropped(&v), vec![5, 8]);
        assert_eq!(v.sent, 0b001);
        // Nothing predicts from a top frame: the next picture is whole.
        let v = d.judge(false, &pic(2), |_, _| Some(Duration::ZERO));
        assert!(dropped(&v).is_empty());
    }

    #[test]
    fn without_limits_only_absent_frames_are_unmarked() {
        let mut d = l3t3(None, None);
        let mut p = pic(1);
        p[7] = 0; // the encoder dropped S2T1
        let v = d.judge(false, &p, |_, _| Some(Duration::from_secs(9)));
        assert!(dropped(&v).is_empty());
        assert_eq!(v.sent, 0b011);
    }
}
